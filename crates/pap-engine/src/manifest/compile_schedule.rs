//! Schedule compile step: the cron expression, the time zone and the event a schedule emits.
//! Schedules come from `schedules:` in pap.yaml and from `schedules/**/*.yaml`.

use croner::parser::{CronParser, Seconds, Year};

use super::compile_trigger::check_id;
use super::compiled::Schedule;
use super::file_ctx::{FileCtx, HelpExt};
use super::raw;
use super::yaml_tree::PathSeg;
use crate::event_type;

/// Parses a standard 5-field cron expression (aliases like `@daily` too; no seconds, no year).
pub(crate) fn parse_cron(text: &str) -> Result<croner::Cron, String> {
    let cron = CronParser::builder()
        .seconds(Seconds::Disallowed)
        .year(Year::Disallowed)
        .build()
        .parse(text)
        .map_err(|e| e.to_string())?;
    // A pattern like `0 0 30 2 *` parses but never fires.
    let probe = jiff::civil::date(2026, 1, 1).at(0, 0, 0, 0);
    cron.find_next_occurrence(&probe, false)
        .map_err(|_| "it never fires (no date matches every field)".to_owned())?;
    Ok(cron)
}

pub fn compile(raw: &raw::Schedule, base: &[PathSeg], ctx: &mut FileCtx) -> Option<Schedule> {
    let errors = ctx.error_count();
    let at = |field: &str| {
        let mut p = base.to_vec();
        p.push(PathSeg::from(field));
        p
    };
    check_id(ctx, &raw.id, &at("id"));
    let cron = match parse_cron(&raw.cron) {
        Ok(c) => Some(c),
        Err(reason) => {
            ctx.at(
                "invalid-cron",
                &at("cron"),
                format!("cron expression `{}`: {reason}", raw.cron),
            )
            .help(
                "five fields: minute hour day-of-month month day-of-week, e.g. `0 6 * * MON-FRI`",
            );
            None
        }
    };
    let timezone_name = raw.timezone.clone().unwrap_or_else(|| "UTC".to_owned());
    let timezone = match jiff::tz::TimeZone::get(&timezone_name) {
        Ok(tz) => Some(tz),
        Err(_) => {
            ctx.at(
                "invalid-timezone",
                &at("timezone"),
                format!("`{timezone_name}` is not a known IANA time zone"),
            )
            .help("use a name like `UTC`, `Europe/Berlin` or `America/New_York`");
            None
        }
    };
    let mut type_at = at("event");
    type_at.push(PathSeg::from("type"));
    let kind = &raw.event.kind;
    if kind.starts_with("pap.") {
        ctx.at(
            "reserved-event-type",
            &type_at,
            format!("schedule event type `{kind}` uses the `pap.` prefix, which only the dispatcher's own events may use"),
        );
    } else if let Err(problem) = event_type::check(kind, false) {
        ctx.at(
            "invalid-event-type",
            &type_at,
            format!("schedule event type `{kind}` {problem}"),
        )
        .help("event types are dot notation: domain.object.condition");
    }
    if ctx.error_count() > errors {
        return None;
    }
    Some(Schedule {
        id: raw.id.clone(),
        file: ctx.file.to_owned(),
        cron_text: raw.cron.clone(),
        cron: cron?,
        timezone: timezone?,
        timezone_name,
        enabled: raw.enabled.unwrap_or(true),
        catch_up: raw.catch_up.unwrap_or(0),
        event_type: kind.clone(),
        data: raw.event.data.clone(),
    })
}
