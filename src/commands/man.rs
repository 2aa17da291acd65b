//! Manual pages (roff, section 1) for `mur` and `mur-roost`, rendered from the same help data
//! `--help` prints, so the package's `man mur` never drifts from the binary. `mur __man NAME`
//! prints one; `scripts/deb.sh` installs them.

use super::help::{Help, COMMANDS, ROOST};

/// The page of `mur` or `mur-roost` at `version`, or `None` for another name.
pub fn page(name: &str, version: &str) -> Option<String> {
    let mut out = header(name, version);
    match name {
        "mur" => {
            out.push_str(".SH NAME\nmur \\- run murmur capsules inside enforced containment\n");
            out.push_str(".SH SYNOPSIS\n.B mur\n.I command\n[options]\n");
            out.push_str(".SH DESCRIPTION\nEach command below takes \\fB\\-h\\fR/\\fB\\-\\-help\\fR, which prints the same text.\n");
            out.push_str(".SH COMMANDS\n");
            for h in COMMANDS {
                command(&mut out, h);
            }
        }
        "mur-roost" => {
            out.push_str(&format!(".SH NAME\nmur-roost \\- {}\n", escape(ROOST.about)));
            out.push_str(&format!(".SH SYNOPSIS\n{}\n", escape(ROOST.usage)));
            out.push_str(".SH OPTIONS\n");
            flags(&mut out, &ROOST);
            out.push_str(&format!(".SH EXAMPLE\n.nf\n{}\n.fi\n", escape(ROOST.example)));
        }
        _ => return None,
    }
    out.push_str(".SH SEE ALSO\n");
    out.push_str(if name == "mur" {
        "mur-roost(1)\n"
    } else {
        "mur(1)\n"
    });
    Some(out)
}

fn header(name: &str, version: &str) -> String {
    format!(
        ".\\\" Rendered by `mur __man {name}` from the binary's help text.\n.TH {} 1 \"\" \"murmur {}\" \"User Commands\"\n",
        name.to_uppercase().replace('-', "\\-"),
        escape(version)
    )
}

fn command(out: &mut String, h: &Help) {
    out.push_str(&format!(
        ".SS {}\n{}\n.PP\n{}\n",
        escape(h.name),
        escape(h.about),
        escape(h.usage)
    ));
    flags(out, h);
    out.push_str(&format!(".PP\nExample:\n.nf\n  {}\n.fi\n", escape(h.example)));
}

fn flags(out: &mut String, h: &Help) {
    for (flag, what) in h.flags {
        out.push_str(&format!(".TP\n.B {}\n{}\n", escape(flag), escape(what)));
    }
}

/// Text made safe for roff: backslashes and hyphens escaped, every other character outside
/// ASCII named by its code point (`\[u2026]`), and no line starting with a control character
/// (`.` or `'`).
fn escape(text: &str) -> String {
    let mut body = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '\\' => body.push_str("\\e"),
            '-' => body.push_str("\\-"),
            c if c.is_ascii() => body.push(c),
            c => body.push_str(&format!("\\[u{:04X}]", c as u32)),
        }
    }
    if body.starts_with('.') || body.starts_with('\'') {
        format!("\\&{body}")
    } else {
        body
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_command_and_flag_of_the_help_is_on_the_page() {
        let mur = page("mur", "1.2.3").unwrap();
        assert!(mur.starts_with(".\\\" Rendered"), "{mur}");
        assert!(mur.contains(".TH MUR 1 \"\" \"murmur 1.2.3\""), "{mur}");
        for h in COMMANDS {
            assert!(mur.contains(&format!(".SS {}\n", escape(h.name))), "{}", h.name);
            for (flag, _) in h.flags {
                assert!(mur.contains(&format!(".B {}\n", escape(flag))), "{flag}");
            }
        }
        let roost = page("mur-roost", "1.2.3").unwrap();
        assert!(roost.contains(".TH MUR\\-ROOST 1"), "{roost}");
        assert!(roost.contains(".B \\-\\-spawn\\-allow NAME\n"), "{roost}");
        assert_eq!(page("mur-other", "1"), None);
    }

    #[test]
    fn a_line_never_starts_as_a_roff_request() {
        assert_eq!(escape(".hidden"), "\\&.hidden");
        assert_eq!(escape("'quote"), "\\&'quote");
        assert_eq!(escape("a\\b-c"), "a\\eb\\-c");
        assert_eq!(escape("sha256:\u{2026}"), "sha256:\\[u2026]");
    }
}
