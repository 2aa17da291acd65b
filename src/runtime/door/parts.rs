//! Which parts a capsule's tasks take (`a2a.input`), checked before a send is accepted: a
//! part of a kind the capsule does not take, or whose media type it does not declare, is
//! `ContentTypeNotSupported` (-32005, A2A 1.0 §3.1.1: "a Media Type provided in the
//! request's message parts that is not supported by the agent"); a file or data part larger
//! than `a2a.input.max_bytes` is `Invalid params` (-32602, naming the bound). What the
//! capsule takes is also what its card declares ([`Takes::input_modes`]).

use crate::a2a::media;
use crate::a2a::parts::{Kind, Part};
use crate::a2a::rpc::{CONTENT_TYPE_NOT_SUPPORTED, INVALID_PARAMS};
use crate::manifest::model::{AnswerAs, TaskIo};

/// What the door checks a send's parts against, and how it answers a waiting send.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Takes {
    pub text: bool,
    pub file: bool,
    pub data: bool,
    /// Normalised ranges a file part's media type must fall in.
    pub media_types: Vec<String>,
    pub max_bytes: u64,
    /// A completed task answers a waiting send with a Message.
    pub message: bool,
    /// Output files come back as artifacts (the card's output modes say so).
    pub output: bool,
}

impl Default for Takes {
    fn default() -> Takes {
        Takes::of(&TaskIo::default())
    }
}

/// The media type a text part may declare: `text/*`.
fn text_ok(mt: &str) -> bool {
    media::within("text/*", mt)
}

/// The media type a data part may declare: JSON (`application/json` or `…+json`).
fn data_ok(mt: &str) -> bool {
    mt == "application/json" || mt.ends_with("+json")
}

impl Takes {
    pub fn of(io: &TaskIo) -> Takes {
        let i = &io.input;
        Takes {
            text: i.text,
            file: i.file,
            data: i.data,
            media_types: i.media_types.clone(),
            max_bytes: i.max_bytes,
            message: io.answer == AnswerAs::Message,
            output: io.output.is_some(),
        }
    }

    /// The card's `defaultInputModes`: `text/plain` for text, `application/json` for data,
    /// the declared ranges for files.
    pub fn input_modes(&self) -> Vec<String> {
        let mut m = Vec::new();
        if self.text {
            m.push("text/plain".to_string());
        }
        if self.data {
            m.push("application/json".to_string());
        }
        if self.file {
            for t in &self.media_types {
                if !m.contains(t) {
                    m.push(t.clone());
                }
            }
        }
        m
    }

    /// The card's `defaultOutputModes`: the answer's `text/plain`, and with an output
    /// directory files of any type (each artifact names its own).
    pub fn output_modes(&self) -> Vec<String> {
        let mut m = vec!["text/plain".to_string()];
        if self.output {
            m.push("*/*".to_string());
        }
        m
    }

    /// Every part of a send is one this capsule takes, else the error to answer with.
    pub fn check(&self, parts: &[Part]) -> Result<(), (i64, String)> {
        for (i, p) in parts.iter().enumerate() {
            self.check_one(p).map_err(|(code, why)| {
                let head = match code {
                    CONTENT_TYPE_NOT_SUPPORTED => "Content type not supported",
                    _ => "Invalid params",
                };
                (
                    code,
                    format!("{head}: part {} ({}): {why}", i + 1, p.kind.as_str()),
                )
            })?;
        }
        Ok(())
    }

    fn check_one(&self, p: &Part) -> Result<(), (i64, String)> {
        let unsupported = |why: String| Err((CONTENT_TYPE_NOT_SUPPORTED, why));
        let taken = match p.kind {
            Kind::Text => self.text,
            Kind::File => self.file,
            Kind::Data => self.data,
        };
        if !taken {
            return unsupported(format!(
                "this capsule takes {} parts only (its card's defaultInputModes: {})",
                self.kinds(),
                self.input_modes().join(", ")
            ));
        }
        let declared = match &p.media_type {
            None => None,
            Some(raw) => match media::essence(raw) {
                Some(mt) => Some(mt),
                None => return unsupported(format!("{:?} is not a media type", clip(raw))),
            },
        };
        match (p.kind, declared.as_deref()) {
            (Kind::Text, Some(mt)) if !text_ok(mt) => return unsupported(format!("a text part of {mt}")),
            (Kind::Data, Some(mt)) if !data_ok(mt) => return unsupported(format!("a data part of {mt}")),
            (Kind::File, mt) => {
                let mt = mt.unwrap_or("application/octet-stream");
                if !self.media_types.iter().any(|r| media::within(r, mt)) {
                    return unsupported(format!(
                        "{mt} is not among the media types this capsule takes ({})",
                        self.media_types.join(", ")
                    ));
                }
            }
            _ => {}
        }
        if p.kind != Kind::Text && p.bytes.len() as u64 > self.max_bytes {
            return Err((
                INVALID_PARAMS,
                format!(
                    "{} bytes, more than the {} bytes a part may hold here (a2a.input.max_bytes)",
                    p.bytes.len(),
                    self.max_bytes
                ),
            ));
        }
        Ok(())
    }

    fn kinds(&self) -> String {
        let k: Vec<&str> = [(self.text, "text"), (self.file, "file"), (self.data, "data")]
            .into_iter()
            .filter_map(|(on, k)| on.then_some(k))
            .collect();
        k.join(", ")
    }
}

fn clip(s: &str) -> String {
    s.chars().filter(|c| !c.is_control()).take(64).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::manifest::model::InputParts;

    fn part(kind: Kind, mt: Option<&str>, len: usize) -> Part {
        Part {
            kind,
            media_type: mt.map(str::to_string),
            name: None,
            bytes: vec![0; len],
        }
    }

    #[test]
    fn kinds_media_types_and_sizes_are_checked_in_part_order() {
        let text_only = Takes::default();
        assert_eq!(text_only.input_modes(), ["text/plain"]);
        assert_eq!(text_only.check(&[part(Kind::Text, None, 0)]), Ok(()));
        assert_eq!(
            text_only.check(&[part(Kind::Text, None, 0), part(Kind::File, Some("image/png"), 3)]),
            Err((
                CONTENT_TYPE_NOT_SUPPORTED,
                "Content type not supported: part 2 (file): this capsule takes text parts only (its card's defaultInputModes: text/plain)".into()
            ))
        );
        let io = TaskIo {
            input: InputParts {
                file: true,
                data: true,
                media_types: vec!["text/csv".into(), "image/*".into()],
                max_bytes: 4,
                ..InputParts::default()
            },
            ..TaskIo::default()
        };
        let t = Takes::of(&io);
        assert_eq!(
            t.input_modes(),
            ["text/plain", "application/json", "text/csv", "image/*"]
        );
        assert_eq!(t.check(&[part(Kind::File, Some("Image/PNG; x=y"), 4)]), Ok(()));
        assert_eq!(
            t.check(&[part(Kind::Data, Some("application/vnd.x+json"), 4)]),
            Ok(())
        );
        for (p, code) in [
            (
                part(Kind::File, Some("application/x-unsupported-tck-type"), 1),
                CONTENT_TYPE_NOT_SUPPORTED,
            ),
            (part(Kind::File, None, 1), CONTENT_TYPE_NOT_SUPPORTED),
            (part(Kind::File, Some("nonsense"), 1), CONTENT_TYPE_NOT_SUPPORTED),
            (
                part(Kind::Text, Some("application/pdf"), 0),
                CONTENT_TYPE_NOT_SUPPORTED,
            ),
            (part(Kind::Data, Some("text/csv"), 1), CONTENT_TYPE_NOT_SUPPORTED),
            (part(Kind::File, Some("text/csv"), 5), INVALID_PARAMS),
            (part(Kind::Data, None, 5), INVALID_PARAMS),
        ] {
            assert_eq!(
                t.check(std::slice::from_ref(&p)).map_err(|e| e.0),
                Err(code),
                "{p:?}"
            );
        }
    }
}
