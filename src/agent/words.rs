//! POSIX word splitting for a shell tool's command line when the binary is not a shell:
//! blanks separate words, single quotes keep everything literally, double quotes keep all
//! but `\"`, `\\`, `\$`, `` \` `` and backslash-newline, and a backslash outside quotes keeps
//! the next character. Nothing is expanded: no variables, globs, tildes or substitutions,
//! and no operators (`;`, `|`, `>` are ordinary characters). The input is a model's.

/// The most words one command line may split into.
pub const MAX_WORDS: usize = 4096;
/// The longest command line split, bytes.
pub const MAX_LINE: usize = 256 << 10;

/// Split `line` into words.
pub fn split(line: &str) -> Result<Vec<String>, String> {
    if line.len() > MAX_LINE {
        return Err(format!("the command line is longer than {MAX_LINE} bytes"));
    }
    if line.contains('\0') {
        return Err("the command line contains a NUL byte".into());
    }
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' | '\n' => {
                if in_word {
                    if words.len() == MAX_WORDS {
                        return Err(format!("more than {MAX_WORDS} words"));
                    }
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(c) => cur.push(c),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some('\n') => {}
                            Some(c @ ('"' | '\\' | '$' | '`')) => cur.push(c),
                            Some(c) => {
                                cur.push('\\');
                                cur.push(c);
                            }
                            None => return Err("unterminated double quote".into()),
                        },
                        Some(c) => cur.push(c),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => match chars.next() {
                Some('\n') => {}
                Some(c) => {
                    in_word = true;
                    cur.push(c);
                }
                None => return Err("a trailing backslash escapes nothing".into()),
            },
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        if words.len() == MAX_WORDS {
            return Err(format!("more than {MAX_WORDS} words"));
        }
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::split;

    fn ok(line: &str) -> Vec<String> {
        split(line).unwrap()
    }

    #[test]
    fn posix_rules_without_expansion() {
        assert_eq!(ok("cat  a.txt\tb"), ["cat", "a.txt", "b"]);
        assert_eq!(ok(r#"echo 'a b' "c d" e\ f"#), ["echo", "a b", "c d", "e f"]);
        assert_eq!(ok(r#"x "a\"b\\c\$d\e" 'it''s'"#), ["x", r#"a"b\c$d\e"#, "its"]);
        assert_eq!(ok("a ''"), ["a", ""]);
        assert_eq!(
            ok("$HOME *.txt ~ a;b | c"),
            ["$HOME", "*.txt", "~", "a;b", "|", "c"]
        );
        assert_eq!(ok("a\\\nb"), ["ab"]);
        assert_eq!(ok("   "), Vec::<String>::new());
    }

    #[test]
    fn malformed_lines_are_errors() {
        assert!(split("'open").is_err());
        assert!(split("\"open").is_err());
        assert!(split("end\\").is_err());
        assert!(split("a\0b").is_err());
        assert!(split(&"a ".repeat(super::MAX_WORDS + 1)).is_err());
    }
}
