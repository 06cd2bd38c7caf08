//! Ids a person can type. An invocation id is `inv_`, twelve hex digits of its creation time,
//! then twenty random-looking hex digits; ids made close together share their start, so the
//! short form comes from the random part: its first [`MIN`] digits, more when another
//! invocation shares them. A command takes the full id, any prefix of it, or a prefix of the
//! random part (the short form or longer).

/// Internal turns' ids start with this (ordinary ones are `inv_` and hex), so they can be
/// told apart in the work index by key alone. The pipeline makes them (`ids::turn`).
pub const TURN_PREFIX: &str = "inv_turn_";

/// The fewest digits a short id has.
pub const MIN: usize = 6;

/// Where the random part of an invocation id starts (`inv_` and the time).
const RANDOM_FROM: usize = 4 + 12;

/// The random part of an invocation id; an id of another shape (an internal turn's) is its
/// own random part after `inv_turn_`, and anything else is taken whole.
pub fn random_part(id: &str) -> &str {
    if let Some(rest) = id.strip_prefix(TURN_PREFIX) {
        return rest;
    }
    match id.strip_prefix("inv_") {
        Some(rest) if rest.len() > 12 && rest.bytes().all(|b| b.is_ascii_hexdigit()) => {
            &id[RANDOM_FROM..]
        }
        _ => id,
    }
}

/// The first [`MIN`] digits of `id`'s random part (all of it when shorter): ids that share
/// them are the only ones its short form must tell it from.
pub fn head(id: &str) -> &str {
    let random = random_part(id);
    random.get(..MIN).unwrap_or(random)
}

/// The random parts of `ids`, sorted: what [`short`] looks up in.
pub fn sorted_random_parts(ids: &[String]) -> Vec<&str> {
    let mut parts: Vec<&str> = ids.iter().map(|id| random_part(id)).collect();
    parts.sort_unstable();
    parts
}

/// The short form of `id`: the shortest prefix of its random part, at least [`MIN`] digits,
/// that no other id of `sorted` (from [`sorted_random_parts`] over ids in the same store;
/// `id` itself may be among them) shares. Only its neighbours in sorted order can share the
/// longest prefix with it, so this is a binary search, not a pass over all.
pub fn short(id: &str, sorted: &[&str]) -> String {
    let mine = random_part(id);
    let common = |other: &str| {
        mine.bytes()
            .zip(other.bytes())
            .take_while(|(a, b)| a == b)
            .count()
    };
    let at = sorted.partition_point(|p| *p < mine);
    // Skip its own entry (or entries: the same random part under another time).
    let mut after = at;
    let mut shared = 0;
    while after < sorted.len() && sorted[after] == mine {
        after += 1;
    }
    if after < sorted.len() {
        shared = shared.max(common(sorted[after]));
    }
    if at > 0 {
        shared = shared.max(common(sorted[at - 1]));
    }
    let len = MIN.max(shared + 1).min(mine.len());
    mine[..len].to_owned()
}

/// Whether `typed` names `id`: the id itself, a prefix of it (with its `inv_`), or a prefix
/// of its random part at least [`MIN`] digits long... or shorter, when that is all a person
/// typed and it is unique: the caller decides what more than one match means.
pub fn names(id: &str, typed: &str) -> bool {
    if typed.is_empty() {
        return false;
    }
    id.starts_with(typed) || random_part(id).starts_with(typed)
}

/// What a typed id came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Resolved {
    One(String),
    None,
    /// Several ids match (the first few, sorted).
    Many(Vec<String>),
}

/// Resolves `typed` among `candidates` (the ids that [`names`] it): an exact match wins.
pub fn resolve(typed: &str, mut candidates: Vec<String>) -> Resolved {
    if candidates.iter().any(|c| c == typed) {
        return Resolved::One(typed.to_owned());
    }
    candidates.sort();
    candidates.dedup();
    match candidates.len() {
        0 => Resolved::None,
        1 => Resolved::One(candidates.remove(0)),
        _ => Resolved::Many(candidates),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: &str = "inv_01a2074130b4_3e03132308a666148d83";

    fn id(time: &str, random: &str) -> String {
        format!("inv_{time}{random}")
    }

    #[test]
    fn the_short_form_is_the_random_part_and_grows_only_to_stay_unique() {
        let a = id("01a2074130b4", "3e03132308a666148d83");
        let b = id("01a2074130b4", "3e0319aa08a666148d83");
        let c = id("01a2074130b5", "77aa132308a666148d83");
        let all = vec![a.clone(), b.clone(), c.clone()];
        let sorted = sorted_random_parts(&all);
        assert_eq!(random_part(&a), "3e03132308a666148d83");
        assert_eq!(short(&c, &sorted), "77aa13");
        assert_eq!(short(&a, &sorted), "3e0313");
        let d = id("01a2074130b6", "3e03132308a666148d00");
        let all = vec![a.clone(), b, c, d.clone()];
        let sorted = sorted_random_parts(&all);
        assert_eq!(short(&a, &sorted), "3e03132308a666148d8");
        assert_eq!(short(&d, &sorted), "3e03132308a666148d0");
        // Not in the list at all: still unique against its neighbours.
        assert_eq!(
            short(&id("01a2074130b7", "3e0320aa08a666148d83"), &sorted),
            "3e0320"
        );
        assert_eq!(random_part("inv_turn_abcdef0123"), "abcdef0123");
        assert_eq!(random_part("odd-id"), "odd-id");
        assert!(!A.is_empty());
    }

    #[test]
    fn a_typed_id_is_the_full_id_a_prefix_or_a_short_form() {
        let a = id("01a2074130b4", "3e03132308a666148d83");
        assert!(names(&a, &a));
        assert!(names(&a, "inv_01a2074"));
        assert!(names(&a, "3e0313"));
        assert!(!names(&a, "01a2074130b4"[..6].trim_start_matches('0')));
        assert!(!names(&a, ""));
        assert_eq!(resolve("3e", vec![a.clone()]), Resolved::One(a.clone()));
        assert_eq!(resolve("x", vec![]), Resolved::None);
        let b = id("01a2074130b4", "3e0319aa08a666148d83");
        assert_eq!(
            resolve("3e03", vec![b.clone(), a.clone()]),
            Resolved::Many(vec![a.clone(), b.clone()])
        );
        // An exact id wins over the longer ids it is a prefix of.
        assert_eq!(
            resolve("ntf_1", vec!["ntf_12".into(), "ntf_1".into()]),
            Resolved::One("ntf_1".into())
        );
    }
}
