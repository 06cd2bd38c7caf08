//! How an error reads on a terminal: the message and each cause after it, joined by `: `,
//! as anyhow's `{:#}` does, except that a cause whose text the message already ends with is
//! said once. Many errors quote their source in their own text (`state store X: {source}`)
//! and also return it as their `source()`; printed as a chain, the cause came out twice
//! ("…magic number mismatch: I/O error: …magic number mismatch").

/// `err` and its causes, each said once.
pub fn describe(err: &anyhow::Error) -> String {
    describe_error(err.as_ref())
}

/// [`describe`] of any error.
pub fn describe_error(err: &(dyn std::error::Error + 'static)) -> String {
    let mut text = String::new();
    for cause in std::iter::successors(Some(err), |e| e.source()) {
        let part = cause.to_string();
        if text.is_empty() {
            text = part;
        } else if !part.is_empty() && !text.ends_with(&part) {
            text.push_str(": ");
            text.push_str(&part);
        }
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("state store s: {source}")]
    struct Quoting {
        source: std::io::Error,
    }

    #[test]
    fn a_cause_the_message_already_quotes_is_said_once() {
        let io = std::io::Error::new(std::io::ErrorKind::InvalidData, "bad magic");
        let err = anyhow::Error::new(Quoting { source: io });
        assert_eq!(describe(&err), "state store s: bad magic");
        let wrapped = err.context("opening the store");
        assert_eq!(
            describe(&wrapped),
            "opening the store: state store s: bad magic"
        );
        let plain = anyhow::anyhow!("inner").context("outer");
        assert_eq!(describe(&plain), "outer: inner");
    }
}
