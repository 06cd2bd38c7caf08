//! `pap hash-password`: an argon2 hash for a console principal, so that no password is ever
//! written into pap.yaml.

use std::io::{BufRead, IsTerminal, Write};

use super::Outcome;

pub(super) fn run() -> anyhow::Result<Outcome> {
    let stdin = std::io::stdin();
    let password = if stdin.is_terminal() {
        let first = prompt("Password: ")?;
        let second = prompt("Again: ")?;
        if first != second {
            crate::say!("error: the two entries differ; nothing was printed");
            return Ok(Outcome::Failure);
        }
        first
    } else {
        let mut line = String::new();
        stdin.lock().read_line(&mut line)?;
        line.trim_end_matches(['\r', '\n']).to_owned()
    };
    if password.is_empty() {
        crate::say!("error: the password is empty; nothing was printed");
        return Ok(Outcome::Failure);
    }
    let hash = crate::serve::http::hash_password(&password)?;
    crate::out!("{hash}")?;
    Ok(Outcome::Success)
}

/// Reads a line from the terminal with echo off (restored even when reading fails).
fn prompt(label: &str) -> anyhow::Result<String> {
    use nix::sys::termios::{LocalFlags, SetArg, tcgetattr, tcsetattr};
    let mut err = std::io::stderr();
    write!(err, "{label}")?;
    err.flush()?;
    let stdin = std::io::stdin();
    let saved = tcgetattr(&stdin)?;
    let mut quiet = saved.clone();
    quiet.local_flags.remove(LocalFlags::ECHO);
    tcsetattr(&stdin, SetArg::TCSANOW, &quiet)?;
    let mut line = String::new();
    let read = stdin.lock().read_line(&mut line);
    tcsetattr(&stdin, SetArg::TCSANOW, &saved)?;
    writeln!(err)?;
    read?;
    Ok(line.trim_end_matches(['\r', '\n']).to_owned())
}
