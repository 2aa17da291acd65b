//! Our own small argument reader, shared by both binaries: `--flag value`, `--flag=value`,
//! bare switches, and one error text for whatever is not understood.

use std::collections::VecDeque;
use std::fmt;

/// Why the command line was refused. Printed as `<binary>: <this>`, exit status 2.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ArgError {
    /// An argument no command takes.
    Unknown(String),
    /// A flag that needs a value came last.
    MissingValue(String),
    /// A value that does not parse.
    BadValue {
        flag: String,
        value: String,
        why: &'static str,
    },
    /// Two flags that cannot be given together.
    Conflict(&'static str, &'static str),
    /// An argument the command read but cannot take (a credential the session does not
    /// declare): why.
    Invalid(String),
}

impl fmt::Display for ArgError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArgError::Unknown(arg) => write!(f, "unknown argument: {arg}"),
            ArgError::MissingValue(flag) => write!(f, "{flag} needs a value"),
            ArgError::BadValue { flag, value, why } => write!(f, "{flag}: '{value}' is not {why}"),
            ArgError::Conflict(a, b) => write!(f, "{a} cannot be used with {b}"),
            ArgError::Invalid(why) => f.write_str(why),
        }
    }
}

/// One argument as read: a flag (with a value given inline after `=`) or a positional word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    Flag { name: String, inline: Option<String> },
    Word(String),
}

/// The remaining arguments.
pub struct Args {
    rest: VecDeque<String>,
}

impl Args {
    /// Arguments after the program name.
    pub fn new<I: IntoIterator<Item = String>>(args: I) -> Args {
        Args {
            rest: args.into_iter().collect(),
        }
    }

    /// The next argument, split at `=` if it is a long flag.
    pub fn next_arg(&mut self) -> Option<Arg> {
        let raw = self.rest.pop_front()?;
        if raw.starts_with("--") && raw.len() > 2 {
            if let Some((name, value)) = raw.split_once('=') {
                return Some(Arg::Flag {
                    name: name.to_string(),
                    inline: Some(value.to_string()),
                });
            }
            return Some(Arg::Flag {
                name: raw,
                inline: None,
            });
        }
        if raw.starts_with('-') && raw.len() > 1 {
            return Some(Arg::Flag {
                name: raw,
                inline: None,
            });
        }
        Some(Arg::Word(raw))
    }

    /// Everything not read yet, as given (the command after `--`).
    pub fn rest(&mut self) -> Vec<String> {
        self.rest.drain(..).collect()
    }

    /// The value of `flag`: the inline part if given, else the next argument.
    pub fn value(&mut self, flag: &str, inline: Option<String>) -> Result<String, ArgError> {
        if let Some(v) = inline {
            return Ok(v);
        }
        self.rest
            .pop_front()
            .ok_or_else(|| ArgError::MissingValue(flag.to_string()))
    }

    /// A whole number value of `flag` (ASCII digits only).
    pub fn number<T: std::str::FromStr>(
        &mut self,
        flag: &str,
        inline: Option<String>,
    ) -> Result<T, ArgError> {
        let value = self.value(flag, inline)?;
        let digits = !value.is_empty() && value.bytes().all(|b| b.is_ascii_digit());
        match value.parse() {
            Ok(n) if digits => Ok(n),
            _ => Err(ArgError::BadValue {
                flag: flag.to_string(),
                value,
                why: "a whole number in range",
            }),
        }
    }
}

/// A switch that takes no value must not be given one.
pub fn no_value(name: &str, inline: Option<String>) -> Result<(), ArgError> {
    match inline {
        None => Ok(()),
        Some(v) => Err(ArgError::Unknown(format!("{name}={v}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Args {
        Args::new(list.iter().map(|s| s.to_string()))
    }

    #[test]
    fn flags_values_and_words() {
        let mut a = args(&["--port", "7", "--x=y", "run", "-v"]);
        assert_eq!(
            a.next_arg(),
            Some(Arg::Flag {
                name: "--port".into(),
                inline: None
            })
        );
        assert_eq!(a.number::<u16>("--port", None), Ok(7));
        assert_eq!(
            a.next_arg(),
            Some(Arg::Flag {
                name: "--x".into(),
                inline: Some("y".into())
            })
        );
        assert_eq!(a.next_arg(), Some(Arg::Word("run".into())));
        assert_eq!(
            a.next_arg(),
            Some(Arg::Flag {
                name: "-v".into(),
                inline: None
            })
        );
        assert_eq!(a.next_arg(), None);
    }

    #[test]
    fn numbers_are_whole_and_in_range() {
        assert!(args(&["+1"]).number::<u16>("--p", None).is_err());
        assert!(args(&["70000"]).number::<u16>("--p", None).is_err());
        assert!(args(&[]).number::<u16>("--p", None).is_err());
        assert_eq!(args(&[]).number::<u16>("--p", Some("0".into())), Ok(0));
        assert_eq!(
            ArgError::Unknown("--max-total".into()).to_string(),
            "unknown argument: --max-total"
        );
    }
}
