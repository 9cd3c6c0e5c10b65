//! Change-freeze windows (`spec.gates.freezeWindows`): one span or a weekly one, each read in its own IANA time zone
//! (the system's tz database, `$TZDIR` or /usr/share/zoneinfo), and whether a moment falls inside one. Pure apart
//! from reading the zone's file when the drill is validated.

use std::fmt;

use chrono::{DateTime, Utc};
use k8s_openapi::jiff::civil::{self, Weekday};
use k8s_openapi::jiff::tz::TimeZone;
use k8s_openapi::jiff::{Timestamp, Zoned};

/// A change freeze: the drill must not start inside it.
#[derive(Debug, Clone, PartialEq)]
pub struct FreezeWindow {
    pub name: String,
    pub zone: Zone,
    pub when: Recurrence,
    pub reason: Option<String>,
}

/// An IANA time zone, kept with the name it was given by.
#[derive(Debug, Clone)]
pub struct Zone {
    pub name: String,
    tz: TimeZone,
}

impl PartialEq for Zone {
    fn eq(&self, other: &Zone) -> bool {
        self.name == other.name
    }
}

/// When a freeze holds, in its zone's local time.
#[derive(Debug, Clone, PartialEq)]
pub enum Recurrence {
    /// From `start` until `end`.
    Once { start: civil::DateTime, end: civil::DateTime },
    /// On each of `days` from `from` until `until` (the next day when `until` is not after `from`).
    Weekly { days: Vec<Weekday>, from: civil::Time, until: civil::Time },
}

/// A freeze window's time zone, time or day that cannot be read: the message says what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FreezeError {
    #[error("`{0}` is not an IANA time zone name such as `Europe/Berlin`")]
    ZoneName(String),
    #[error("unknown time zone `{name}` ({path}: {cause}); use an IANA name such as `Europe/Berlin`")]
    UnknownZone { name: String, path: String, cause: String },
    #[error("cannot read time zone `{name}`: {cause}")]
    ZoneData { name: String, cause: String },
    #[error("`{0}` is not a local date and time such as `2026-12-19T18:00`")]
    Local(String),
    #[error("`{0}` is not a time of day such as `16:00`")]
    Time(String),
    #[error("`{0}` is not a day of the week: `mon` to `sun`")]
    Day(String),
}

impl Zone {
    /// Reads the zone from the system's tz database (`$TZDIR`, else /usr/share/zoneinfo); `UTC` needs none.
    pub fn load(name: &str) -> Result<Zone, FreezeError> {
        if name == "UTC" || name == "Etc/UTC" {
            return Ok(Zone { name: name.into(), tz: TimeZone::UTC });
        }
        let valid = !name.is_empty()
            && !name.starts_with('/')
            && name.split('/').all(|part| !part.is_empty() && part != "." && part != "..");
        if !valid {
            return Err(FreezeError::ZoneName(name.into()));
        }
        let dir = std::env::var_os("TZDIR").unwrap_or_else(|| "/usr/share/zoneinfo".into());
        let path = std::path::Path::new(&dir).join(name);
        let data = std::fs::read(&path).map_err(|e| FreezeError::UnknownZone {
            name: name.into(),
            path: path.display().to_string(),
            cause: e.to_string(),
        })?;
        let tz = TimeZone::tzif(name, &data)
            .map_err(|e| FreezeError::ZoneData { name: name.into(), cause: e.to_string() })?;
        Ok(Zone { name: name.into(), tz })
    }

    fn at(&self, now: DateTime<Utc>) -> Option<Zoned> {
        Timestamp::from_millisecond(now.timestamp_millis()).ok().map(|t| t.to_zoned(self.tz.clone()))
    }

    fn instant(&self, local: civil::DateTime) -> Option<Timestamp> {
        self.tz.to_zoned(local).ok().map(|z| z.timestamp())
    }
}

/// A local date and time as a freeze window writes it: `2026-12-19T18:00` (seconds optional).
pub fn parse_local(text: &str) -> Result<civil::DateTime, FreezeError> {
    text.trim().parse().map_err(|_| FreezeError::Local(text.into()))
}

/// A local time of day: `16:00`.
pub fn parse_time(text: &str) -> Result<civil::Time, FreezeError> {
    text.trim().parse().map_err(|_| FreezeError::Time(text.into()))
}

/// A day of the week: `mon` to `sun`, or its full name.
pub fn parse_day(text: &str) -> Result<Weekday, FreezeError> {
    Ok(match text.trim().to_ascii_lowercase().as_str() {
        "mon" | "monday" => Weekday::Monday,
        "tue" | "tuesday" => Weekday::Tuesday,
        "wed" | "wednesday" => Weekday::Wednesday,
        "thu" | "thursday" => Weekday::Thursday,
        "fri" | "friday" => Weekday::Friday,
        "sat" | "saturday" => Weekday::Saturday,
        "sun" | "sunday" => Weekday::Sunday,
        _ => return Err(FreezeError::Day(text.into())),
    })
}

impl FreezeWindow {
    /// Whether `now` falls inside the window.
    pub fn contains(&self, now: DateTime<Utc>) -> bool {
        let Some(local) = self.zone.at(now) else { return false };
        match &self.when {
            Recurrence::Once { start, end } => {
                let (Some(start), Some(end)) = (self.zone.instant(*start), self.zone.instant(*end)) else {
                    return false;
                };
                (start..end).contains(&local.timestamp())
            }
            Recurrence::Weekly { days, from, until } => {
                let (day, time) = (local.weekday(), local.time());
                if from < until {
                    days.contains(&day) && (*from..*until).contains(&time)
                } else {
                    (days.contains(&day) && time >= *from) || (days.contains(&day.previous()) && time < *until)
                }
            }
        }
    }
}

impl fmt::Display for FreezeWindow {
    /// `year-end (2026-12-19T18:00 to 2027-01-04T08:00 Europe/Berlin): the year-end change freeze`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let zone = &self.zone.name;
        match &self.when {
            Recurrence::Once { start, end } => write!(
                f,
                "{} ({} to {} {zone})",
                self.name,
                start.strftime("%Y-%m-%dT%H:%M"),
                end.strftime("%Y-%m-%dT%H:%M")
            )?,
            Recurrence::Weekly { days, from, until } => {
                let days: Vec<String> = days.iter().map(|d| format!("{d:?}")[..3].to_ascii_lowercase()).collect();
                write!(
                    f,
                    "{} ({} {} to {} {zone})",
                    self.name,
                    days.join(","),
                    from.strftime("%H:%M"),
                    until.strftime("%H:%M")
                )?
            }
        }
        match &self.reason {
            Some(reason) => write!(f, ": {reason}"),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(text).unwrap().with_timezone(&Utc)
    }

    fn window(zone: &str, when: Recurrence) -> FreezeWindow {
        FreezeWindow { name: "w".into(), zone: Zone::load(zone).unwrap(), when, reason: None }
    }

    #[test]
    fn a_one_off_window_is_read_in_its_own_time_zone() {
        let once = Recurrence::Once {
            start: parse_local("2026-12-19T18:00").unwrap(),
            end: parse_local("2027-01-04T08:00").unwrap(),
        };
        let berlin = window("Europe/Berlin", once);
        // 18:00 in Berlin is 17:00 UTC in winter.
        assert!(!berlin.contains(at("2026-12-19T16:59:59Z")));
        assert!(berlin.contains(at("2026-12-19T17:00:00Z")));
        assert!(berlin.contains(at("2027-01-04T06:59:59Z")));
        assert!(!berlin.contains(at("2027-01-04T07:00:00Z")));
        assert_eq!(berlin.to_string(), "w (2026-12-19T18:00 to 2027-01-04T08:00 Europe/Berlin)");
    }

    #[test]
    fn a_weekly_window_may_run_past_midnight() {
        let friday_night = Recurrence::Weekly {
            days: vec![parse_day("fri").unwrap()],
            from: parse_time("16:00").unwrap(),
            until: parse_time("02:00").unwrap(),
        };
        let ny = window("America/New_York", friday_night);
        // Friday 2026-12-04, New York is UTC-5.
        assert!(!ny.contains(at("2026-12-04T20:59:00Z")));
        assert!(ny.contains(at("2026-12-04T21:00:00Z")));
        assert!(ny.contains(at("2026-12-05T06:59:00Z")), "Saturday 01:59 local is still Friday's night");
        assert!(!ny.contains(at("2026-12-05T07:00:00Z")));
        assert!(!ny.contains(at("2026-12-03T22:00:00Z")), "a Thursday");
    }

    #[test]
    fn zones_and_days_are_checked() {
        assert!(Zone::load("Mars/Olympus").unwrap_err().to_string().starts_with("unknown time zone `Mars/Olympus`"));
        assert!(Zone::load("../etc/passwd").is_err());
        assert!(Zone::load("UTC").is_ok());
        assert_eq!(parse_day("Friday"), Ok(Weekday::Friday));
        assert!(parse_day("fr").is_err());
        assert!(parse_day("frx").is_err());
        assert!(parse_local("19.12.2026 18:00").is_err());
        assert!(parse_time("25:00").is_err());
    }
}
