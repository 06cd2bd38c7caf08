//! ANP section 4, row by row: who received what, and in which state it ended. Each source
//! agent of the `notify` fixture routes its success one way (`a-<address><target><handler>`).

use crate::common;

use common::notify::{NotifyProject, messages_of};
use serde_json::{Value, json};

fn carried_by(p: &NotifyProject, agent: &str) -> Vec<Value> {
    p.invocations()
        .into_iter()
        .filter(|i| i["agent"] == agent)
        .collect()
}

// --- 4.1: target user, delivery guaranteed -------------------------------------------------

#[test]
fn user_user_system_is_a_direct_inbox_entry_and_the_agent_sees_it_next_turn() {
    let p = NotifyProject::new();
    p.fire("a-uus", "e1", json!({}));
    let n = p.notification_of("a-uus", "invocation.succeeded");
    assert_eq!(n["status"], "dispatched");
    assert_eq!(
        n["routing"],
        json!({"address": "user", "target": "user", "handler": "system"})
    );
    let inbox = p.inbox();
    let msgs = messages_of(&inbox, &n);
    assert_eq!(msgs.len(), 1);
    assert_eq!(
        (msgs[0]["author"].as_str(), msgs[0]["session"].as_str()),
        (Some("system"), None)
    );
    assert_eq!(msgs[0]["user"], "alice");
    assert_eq!(msgs[0]["metadata"]["trigger"], "t-a-uus");

    // Ambient awareness, and causal order (ANP 6.4): the next turn of a-uus carries it, and
    // the inbox already held its system entry when that turn started.
    p.fire("a-uus", "e2", json!({}));
    let second = carried_by(&p, "a-uus").pop().unwrap();
    let carried = second["notifications"].as_array().unwrap();
    assert_eq!(carried.len(), 1, "{second:#}");
    assert_eq!(carried[0]["id"], n["id"]);
    assert_eq!(carried[0]["seen_by_user"], false);
    assert!(carried[0]["inbox_mark"].as_u64().unwrap() >= msgs[0]["id"].as_u64().unwrap());
    // The human's entry is untouched by the agent seeing it.
    assert_eq!(
        p.notification(n["id"].as_str().unwrap())["status"],
        "dispatched"
    );
}

#[test]
fn user_user_agent_is_narrated_by_the_handling_agent() {
    let p = NotifyProject::new();
    p.fire("a-uua", "e1", json!({}));
    let n = p.notification_of("a-uua", "invocation.succeeded");
    assert_eq!(n["status"], "delivered", "{n:#}");
    assert_eq!(n["owner_lease"], 1);
    let inbox = p.inbox();
    let msgs = messages_of(&inbox, &n);
    assert_eq!(msgs.len(), 1, "only the narration, no raw entry: {msgs:#?}");
    assert_eq!(msgs[0]["author"], "assistant");
    assert_eq!(msgs[0]["content"], "Narrated for you: something happened");
    let turn = carried_by(&p, "narrator").pop().unwrap();
    assert_eq!(turn["internal"], true);
    assert_eq!(turn["notifications"][0]["handle"], true);
    assert_eq!(turn["notifications"][0]["lease"], 1);
}

#[test]
fn session_user_system_lands_in_the_open_session_thread() {
    let p = NotifyProject::new();
    p.run(&["inbox", "session", "open", "ops"], 0);
    p.fire("a-sus", "e1", json!({}));
    let n = p.notification_of("a-sus", "invocation.succeeded");
    assert_eq!(n["status"], "dispatched");
    let thread = common::notify::lines(&p.run(&["inbox", "--json", "--session", "ops"], 0));
    assert_eq!(thread.len(), 1);
    assert_eq!(thread[0]["session"], "ops");
    assert_eq!(thread[0]["routing"]["address"], "session");

    // ANP 5.2: the user acknowledges it; the agent's next turn gets it marked as seen.
    let id = thread[0]["id"].to_string();
    p.run(&["inbox", "ack", &id], 0);
    assert_eq!(
        p.notification(n["id"].as_str().unwrap())["status"],
        "delivered"
    );
    p.fire("a-sus", "e2", json!({}));
    let next = carried_by(&p, "a-sus").pop().unwrap();
    assert_eq!(next["notifications"][0]["id"], n["id"]);
    assert_eq!(next["notifications"][0]["seen_by_user"], true);
}

#[test]
fn a_closed_session_falls_back_to_the_user_scope() {
    let p = NotifyProject::new();
    p.run(&["inbox", "session", "open", "ops"], 0);
    p.run(&["inbox", "session", "close", "ops"], 0);
    p.fire("a-sus", "e1", json!({}));
    let n = p.notification_of("a-sus", "invocation.succeeded");
    assert_eq!(n["routing"]["address"], "user");
    let inbox = p.inbox();
    let msgs = messages_of(&inbox, &n);
    assert_eq!((msgs.len(), msgs[0]["session"].clone()), (1, Value::Null));
    let notes: Vec<&str> = n["history"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["note"].as_str())
        .collect();
    assert!(
        notes
            .iter()
            .any(|s| s.contains("not open: address set to user")),
        "{notes:?}"
    );
}

#[test]
fn session_user_agent_is_narrated_into_the_session() {
    let p = NotifyProject::new();
    p.run(&["inbox", "session", "open", "ops"], 0);
    p.fire("a-sua", "e1", json!({}));
    let n = p.notification_of("a-sua", "invocation.succeeded");
    assert_eq!(n["status"], "delivered");
    let inbox = p.inbox();
    let msgs = messages_of(&inbox, &n);
    assert_eq!(msgs.len(), 1);
    assert_eq!(
        (msgs[0]["author"].as_str(), msgs[0]["session"].as_str()),
        (Some("assistant"), Some("ops"))
    );
}

#[test]
fn a_silent_handler_with_target_user_escalates_at_once() {
    let p = NotifyProject::new();
    p.fire("a-silent", "e1", json!({}));
    let n = p.notification_of("a-silent", "invocation.succeeded");
    assert_eq!(n["status"], "escalated");
    assert_eq!(n["owner_lease"], 2);
    assert_eq!(n["routing"]["handler"], "system");
    let inbox = p.inbox();
    let msgs = messages_of(&inbox, &n);
    assert_eq!(msgs.len(), 1);
    assert_eq!(msgs[0]["author"], "system");
    // The human's acknowledgement ends it (ESCALATED → DELIVERED).
    p.run(&["inbox", "ack", &msgs[0]["id"].to_string()], 0);
    assert_eq!(
        p.notification(n["id"].as_str().unwrap())["status"],
        "delivered"
    );
}

// --- 4.2: target agent, delivery discretionary ----------------------------------------------

#[test]
fn user_agent_system_waits_in_the_agents_queue_until_its_next_invocation() {
    let p = NotifyProject::new();
    p.fire("a-uas", "e1", json!({}));
    let n = p.notification_of("a-uas", "invocation.succeeded");
    assert_eq!(n["status"], "pending");
    assert!(
        messages_of(&p.inbox(), &n).is_empty(),
        "the human is blind to it"
    );
    p.fire("observer", "poke1", json!({}));
    let n = p.notification(n["id"].as_str().unwrap());
    assert_eq!(n["status"], "delivered");
    let carrier = carried_by(&p, "observer").pop().unwrap();
    assert_eq!(n["delivered_with"], carrier["id"]);
    assert_eq!(carrier["notifications"][0]["id"], n["id"]);
    // Delivered once: the next invocation does not carry it again.
    p.fire("observer", "poke2", json!({}));
    let later = carried_by(&p, "observer").pop().unwrap();
    assert!(
        later["notifications"]
            .as_array()
            .is_none_or(|a| a.is_empty()),
        "{later:#}"
    );
}

#[test]
fn session_agent_system_is_queued_the_same_way() {
    let p = NotifyProject::new();
    p.fire("a-sas", "e1", json!({}));
    let n = p.notification_of("a-sas", "invocation.succeeded");
    assert_eq!(
        (n["status"].as_str(), n["routing"]["address"].as_str()),
        (Some("pending"), Some("session"))
    );
    assert!(messages_of(&p.inbox(), &n).is_empty());
    p.fire("observer", "poke", json!({}));
    assert_eq!(
        p.notification(n["id"].as_str().unwrap())["status"],
        "delivered"
    );
}

#[test]
fn user_agent_agent_is_processed_by_the_agent_without_the_human() {
    let p = NotifyProject::new();
    p.fire("a-uaa", "e1", json!({}));
    let n = p.notification_of("a-uaa", "invocation.succeeded");
    assert_eq!(n["status"], "delivered", "{n:#}");
    assert!(n["owner"].as_str().unwrap().starts_with("agent:inv_"));
    assert!(
        messages_of(&p.inbox(), &n).is_empty(),
        "acknowledged silently: the human sees nothing"
    );
    assert!(p.runs_log().contains("start quiet"));
}

#[test]
fn session_agent_agent_reaches_the_human_only_when_the_agent_speaks() {
    let p = NotifyProject::new();
    p.run(&["inbox", "session", "open", "ops"], 0);
    p.fire("a-saa", "e1", json!({}));
    let n = p.notification_of("a-saa", "invocation.succeeded");
    assert_eq!(n["status"], "delivered");
    let inbox = p.inbox();
    let msgs = messages_of(&inbox, &n);
    assert_eq!(msgs.len(), 1);
    assert_eq!(
        (msgs[0]["author"].as_str(), msgs[0]["session"].as_str()),
        (Some("assistant"), Some("ops"))
    );
    // No self-echo: the narration never comes back to the narrator as news.
    p.fire("a-saa", "e2", json!({}));
    let turns = carried_by(&p, "narrator");
    let last = turns.last().unwrap();
    let carried = last["notifications"].as_array().unwrap();
    assert!(carried.iter().all(|c| c["handle"] == true), "{carried:#?}");
}

#[test]
fn a_critical_notification_for_an_agent_forces_a_turn_at_once() {
    let p = NotifyProject::new();
    p.fire("a-crit", "e1", json!({}));
    let n = p.notification_of("a-crit", "invocation.succeeded");
    assert_eq!(n["level"], "critical");
    assert_eq!(
        n["status"], "delivered",
        "no waiting for the next natural turn: {n:#}"
    );
    let turn = carried_by(&p, "observer").pop().unwrap();
    assert_eq!(
        (turn["internal"].as_bool(), turn["event_type"].as_str()),
        (Some(true), Some("pap.notification.critical"))
    );
    assert_eq!(n["delivered_with"], turn["id"]);
}
