//! `.indexignore` files, as operator-registry honours them when walking a catalog folder.
//!
//! Each `.indexignore` applies to its own folder and everything below it, with gitignore-style
//! lines: blank lines and `#` comments are skipped, `!` re-includes, a trailing `/` matches only
//! folders, a pattern with a `/` is anchored to the `.indexignore`'s folder, one without matches
//! a name at any depth; `*` and `?` stay within one path segment and `**` spans segments. The
//! last matching line wins. Character classes (`[a-z]`) are not supported and match literally.

/// Name of the ignore file (itself never part of the catalog).
pub(crate) const INDEXIGNORE: &str = ".indexignore";

/// Patterns longer than this are refused: matching cost grows with pattern length.
const MAX_PATTERN_LEN: usize = 4096;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(u8),
    AnyChar,
    Star,
    DoubleStar,
    /// `**/`: nothing, or anything ending in `/`.
    DoubleStarSlash,
}

#[derive(Debug, Clone)]
struct Rule {
    /// Folder of the `.indexignore`, relative to the walk root (`""` for the root), `/`-separated.
    base: String,
    tokens: Vec<Token>,
    negate: bool,
    dir_only: bool,
    anchored: bool,
}

/// The rules in force while walking a folder tree.
#[derive(Debug, Clone, Default)]
pub(crate) struct IgnoreRules {
    rules: Vec<Rule>,
}

impl IgnoreRules {
    /// Adds the lines of the `.indexignore` found in folder `base` (relative, `/`-separated).
    pub(crate) fn add_file(&mut self, base: &str, content: &str) -> Result<(), String> {
        for (number, line) in content.lines().enumerate() {
            let line = line.trim_end();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            if line.len() > MAX_PATTERN_LEN {
                return Err(format!(
                    "line {} is longer than {MAX_PATTERN_LEN} bytes",
                    number + 1
                ));
            }
            let (negate, line) = match line.strip_prefix('!') {
                Some(rest) => (true, rest),
                None => (false, line.strip_prefix('\\').unwrap_or(line)),
            };
            let (dir_only, line) = match line.strip_suffix('/') {
                Some(rest) => (true, rest),
                None => (false, line),
            };
            let anchored = line.contains('/');
            let line = line.strip_prefix('/').unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            self.rules.push(Rule {
                base: base.to_owned(),
                tokens: tokenize(line),
                negate,
                dir_only,
                anchored,
            });
        }
        Ok(())
    }

    /// Whether `path` (relative to the walk root, `/`-separated) is ignored.
    pub(crate) fn is_ignored(&self, path: &str, is_dir: bool) -> bool {
        let mut ignored = false;
        for rule in &self.rules {
            let Some(relative) = relative_to(path, &rule.base) else {
                continue;
            };
            if rule.dir_only && !is_dir {
                continue;
            }
            let subject = if rule.anchored {
                relative
            } else {
                relative.rsplit('/').next().unwrap_or(relative)
            };
            if matches(&rule.tokens, subject.as_bytes()) {
                ignored = !rule.negate;
            }
        }
        ignored
    }
}

fn relative_to<'a>(path: &'a str, base: &str) -> Option<&'a str> {
    if base.is_empty() {
        return Some(path);
    }
    path.strip_prefix(base)?.strip_prefix('/')
}

fn tokenize(pattern: &str) -> Vec<Token> {
    let bytes = pattern.as_bytes();
    let mut tokens = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while let Some(&byte) = bytes.get(i) {
        match byte {
            b'*' if bytes.get(i + 1) == Some(&b'*') => {
                if bytes.get(i + 2) == Some(&b'/') {
                    tokens.push(Token::DoubleStarSlash);
                    i += 3;
                } else {
                    tokens.push(Token::DoubleStar);
                    i += 2;
                }
            }
            b'*' => {
                tokens.push(Token::Star);
                i += 1;
            }
            b'?' => {
                tokens.push(Token::AnyChar);
                i += 1;
            }
            b'\\' if bytes.get(i + 1).is_some() => {
                tokens.push(Token::Literal(bytes.get(i + 1).copied().unwrap_or(b'\\')));
                i += 2;
            }
            other => {
                tokens.push(Token::Literal(other));
                i += 1;
            }
        }
    }
    tokens
}

/// Glob match by dynamic programming (no backtracking blow-up): `next[j]` is whether the tokens
/// after the current one match `subject[j..]`.
fn matches(tokens: &[Token], subject: &[u8]) -> bool {
    let n = subject.len();
    let mut next = vec![false; n + 1];
    next[n] = true;
    for token in tokens.iter().rev() {
        let mut current = vec![false; n + 1];
        // For `**/`: whether some k > j with subject[k-1] == '/' has next[k].
        let mut slash_ahead = false;
        for j in (0..=n).rev() {
            let here = subject.get(j).copied();
            current[j] = match token {
                Token::Literal(c) => here == Some(*c) && next[j + 1],
                Token::AnyChar => here.is_some_and(|b| b != b'/') && next[j + 1],
                Token::Star => {
                    next[j]
                        || (here.is_some_and(|b| b != b'/')
                            && current.get(j + 1).copied().unwrap_or(false))
                }
                Token::DoubleStar => {
                    next[j] || (here.is_some() && current.get(j + 1).copied().unwrap_or(false))
                }
                Token::DoubleStarSlash => {
                    if here == Some(b'/') && next[j + 1] {
                        slash_ahead = true;
                    }
                    next[j] || slash_ahead
                }
            };
        }
        next = current;
    }
    next[0]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(base: &str, text: &str) -> IgnoreRules {
        let mut rules = IgnoreRules::default();
        assert!(rules.add_file(base, text).is_ok());
        rules
    }

    #[test]
    fn gitignore_subset() {
        let r = rules(
            "",
            "# comment\n*.md\n/top.json\ndocs/\n!keep.md\nsub/**/x.yaml\n",
        );
        assert!(r.is_ignored("README.md", false));
        assert!(r.is_ignored("a/b/notes.md", false));
        assert!(!r.is_ignored("a/keep.md", false));
        assert!(r.is_ignored("top.json", false));
        assert!(!r.is_ignored("a/top.json", false));
        assert!(r.is_ignored("a/docs", true));
        assert!(!r.is_ignored("a/docs", false));
        assert!(r.is_ignored("sub/x.yaml", false));
        assert!(r.is_ignored("sub/p/q/x.yaml", false));
        assert!(!r.is_ignored("other/x.yaml", false));
        assert!(!r.is_ignored("catalog.yaml", false));
    }

    #[test]
    fn rules_apply_below_their_folder_only() {
        let r = rules("pkg", "*.json\n");
        assert!(r.is_ignored("pkg/a.json", false));
        assert!(!r.is_ignored("other/a.json", false));
        assert!(!r.is_ignored("pkgx/a.json", false));
    }

    #[test]
    fn stars_stay_in_one_segment() {
        assert!(matches(&tokenize("a*c"), b"abbc"));
        assert!(!matches(&tokenize("a*c"), b"ab/c"));
        assert!(matches(&tokenize("a**c"), b"ab/c"));
        assert!(matches(&tokenize("a?c"), b"abc"));
        assert!(!matches(
            &tokenize("*a*a*a*a*a*a*a*b"),
            "a".repeat(200).as_bytes()
        ));
    }
}
