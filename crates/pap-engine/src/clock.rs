//! Time, injected: the system clock in production, a fake clock in tests.
//!
//! Everything that reads the time or waits (throttle windows, idempotency expiry, approval
//! deadlines, retry backoff) goes through [`Clock`], so a test can move through a 24-hour TTL
//! or a throttle window without sleeping. The fake clock starts at `PAP_NOW` (RFC 3339) and
//! only moves when pap waits: a backoff of 5 s advances it by 5 s at once.
//!
//! `PAP_NOW` is read only by builds with the `test-clock` feature, which the test suite turns
//! on (a dev-dependency of the crate on itself) and `cargo build --release` or `cargo install`
//! never do: in a production binary an environment variable must not be able to move time,
//! since that would let a decided event be decided again or a claim be stored "until 2099".
//! A person testing rules for another moment uses `pap dispatch --dry-run --at TIME`, which
//! writes nothing.
//!
//! The only module that reads the system's time for a decision: `clippy.toml` refuses
//! `SystemTime::now` and `jiff::Timestamp::now` elsewhere, and the few places that mean the
//! system's own time (a file's age, the offset to a database's clock) allow it and say why.
#![allow(clippy::disallowed_methods)]

use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::{SignedDuration, Timestamp};

/// The environment variable that switches on the fake clock (for tests and rule testing).
#[cfg(feature = "test-clock")]
pub(crate) const FAKE_NOW_ENV: &str = "PAP_NOW";
/// With [`FAKE_NOW_ENV`], makes the clock run instead of standing still: this many times as
/// fast as the wall clock, from `PAP_NOW` at the wall-clock moment [`CLOCK_EPOCH_ENV`]. A soak
/// test crosses a month of TTLs and retentions in an hour with it, every process it starts
/// reading the same time (test builds only, as `PAP_NOW`).
#[cfg(feature = "test-clock")]
pub(crate) const CLOCK_SPEED_ENV: &str = "PAP_CLOCK_SPEED";
/// The wall-clock moment (RFC 3339) at which a running test clock reads `PAP_NOW`.
#[cfg(feature = "test-clock")]
pub(crate) const CLOCK_EPOCH_ENV: &str = "PAP_CLOCK_EPOCH";

#[derive(Debug, Clone)]
pub enum Clock {
    System,
    /// The system clock moved by an offset a shared store keeps measuring (milliseconds):
    /// the database's clock, so that nodes whose clocks differ decide on one time.
    Offset(Arc<AtomicI64>),
    Fake(Arc<Mutex<Timestamp>>),
    /// A test clock that runs `speed` times as fast as the wall clock: `at` when the wall
    /// clock read `epoch` (see [`CLOCK_SPEED_ENV`]).
    Scaled {
        at: Timestamp,
        epoch: Timestamp,
        speed: f64,
    },
}

impl Clock {
    /// In test builds, the fake clock when `PAP_NOW` is set (an error names a bad value);
    /// otherwise, and always in production builds, the system clock.
    #[cfg(feature = "test-clock")]
    pub fn from_env() -> anyhow::Result<Clock> {
        let stamp = |name: &str, text: &str| -> anyhow::Result<Timestamp> {
            text.parse().map_err(|err| {
                anyhow::anyhow!("{name}={text:?} is not an RFC 3339 timestamp: {err}")
            })
        };
        let at = match std::env::var(FAKE_NOW_ENV) {
            Ok(text) if !text.is_empty() => stamp(FAKE_NOW_ENV, &text)?,
            _ => return Ok(Clock::System),
        };
        let Some(speed) = std::env::var(CLOCK_SPEED_ENV)
            .ok()
            .filter(|s| !s.is_empty())
        else {
            return Ok(Clock::fake(at));
        };
        let speed: f64 = speed
            .parse()
            .ok()
            .filter(|s: &f64| s.is_finite() && *s > 0.0)
            .ok_or_else(|| {
                anyhow::anyhow!("{CLOCK_SPEED_ENV}={speed:?} is not a positive number")
            })?;
        let epoch = std::env::var(CLOCK_EPOCH_ENV).map_err(|_| {
            anyhow::anyhow!("{CLOCK_SPEED_ENV} needs {CLOCK_EPOCH_ENV}: the wall-clock moment at which the clock reads {FAKE_NOW_ENV}")
        })?;
        Ok(Clock::Scaled {
            at,
            epoch: stamp(CLOCK_EPOCH_ENV, &epoch)?,
            speed,
        })
    }

    /// Production builds: the system clock, whatever the environment says.
    #[cfg(not(feature = "test-clock"))]
    pub fn from_env() -> anyhow::Result<Clock> {
        Ok(Clock::System)
    }

    pub fn fake(at: Timestamp) -> Clock {
        Clock::Fake(Arc::new(Mutex::new(at)))
    }

    pub fn now(&self) -> Timestamp {
        match self {
            Clock::System => Timestamp::now(),
            Clock::Offset(offset) => {
                let by = SignedDuration::from_millis(offset.load(Ordering::Relaxed));
                Timestamp::now()
                    .checked_add(by)
                    .unwrap_or_else(|_| Timestamp::now())
            }
            Clock::Fake(at) => *at.lock().expect("clock lock"),
            Clock::Scaled { at, epoch, speed } => {
                let real = Timestamp::now().duration_since(*epoch);
                let ran = SignedDuration::try_from_secs_f64(real.as_secs_f64() * speed)
                    .unwrap_or(SignedDuration::MAX);
                at.checked_add(ran).unwrap_or(Timestamp::MAX)
            }
        }
    }

    /// Milliseconds since the Unix epoch, the unit the store keeps times in.
    pub fn now_ms(&self) -> i64 {
        self.now().as_millisecond()
    }

    /// Waits `d`: really on the system clock, instantly (advancing time) on the fake one.
    pub async fn sleep(&self, d: Duration) {
        match self {
            Clock::System | Clock::Offset(_) => tokio::time::sleep(d).await,
            Clock::Fake(at) => self.advance_locked(at, d),
            Clock::Scaled { speed, .. } => tokio::time::sleep(d.div_f64(*speed)).await,
        }
    }

    fn advance_locked(&self, at: &Mutex<Timestamp>, d: Duration) {
        let mut at = at.lock().expect("clock lock");
        let step = SignedDuration::try_from(d).unwrap_or(SignedDuration::MAX);
        *at = at.checked_add(step).unwrap_or(Timestamp::MAX);
    }
}

/// RFC 3339 in UTC with millisecond precision, the form every stored and printed time takes.
/// When `ms` happens, for a sentence: `at 2026-…Z`, or `never (past the year 9999)` for a
/// moment a duration pushed past what a timestamp can say (a debounce of 10^15 seconds).
pub(crate) fn at_or_never(ms: i64) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(ts) => format!("at {ts:.3}"),
        Err(_) if ms > 0 => "never (past the year 9999)".into(),
        Err(_) => format!("at {ms} ms since 1970"),
    }
}

pub fn rfc3339_ms(ms: i64) -> String {
    match Timestamp::from_millisecond(ms) {
        Ok(ts) => format!("{ts:.3}"),
        Err(_) => ms.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn fake_clock_moves_only_when_waiting() {
        let start: Timestamp = "2026-03-11T06:00:00Z".parse().unwrap();
        let clock = Clock::fake(start);
        assert_eq!(clock.now(), start);
        clock.sleep(Duration::from_secs(5)).await;
        assert_eq!(clock.now_ms() - start.as_millisecond(), 5000);
    }

    #[tokio::test]
    async fn a_scaled_clock_runs_faster_from_its_epoch() {
        let start: Timestamp = "2026-03-11T06:00:00Z".parse().unwrap();
        let clock = Clock::Scaled {
            at: start,
            epoch: Timestamp::now(),
            speed: 1000.0,
        };
        let before = clock.now_ms();
        // 100 s of the clock's time are 0.1 s of the wall clock's.
        let waited = std::time::Instant::now();
        clock.sleep(Duration::from_secs(100)).await;
        assert!(waited.elapsed() < Duration::from_secs(5));
        let ran = clock.now_ms() - before;
        assert!((100_000..200_000).contains(&ran), "{ran} ms");
        assert!(before - start.as_millisecond() < 60_000);
    }

    #[test]
    fn an_offset_clock_follows_the_offset_it_is_given() {
        let offset = Arc::new(AtomicI64::new(60_000));
        let clock = Clock::Offset(offset.clone());
        let ahead = clock.now_ms() - Clock::System.now_ms();
        assert!((59_000..=61_000).contains(&ahead), "{ahead}");
        offset.store(-5_000, Ordering::Relaxed);
        let behind = clock.now_ms() - Clock::System.now_ms();
        assert!((-6_000..=-4_000).contains(&behind), "{behind}");
    }

    #[test]
    fn formats_milliseconds_in_utc() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_773_208_800_123), "2026-03-11T06:00:00.123Z");
    }
}
