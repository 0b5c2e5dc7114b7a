//! A byte cursor over a range string, and error positions that people can count.
//!
//! Both range grammars are ASCII, so the parsers walk bytes and stop at the first byte they do
//! not expect. Positions in error messages are character offsets from 0, because that is what a
//! person counts when they look at the string, even if it holds a stray non-ASCII character.

use super::RangeError;

/// Builds the error for `input` with a reason that already names the position.
pub(super) fn error_at(input: &str, byte_pos: usize, reason: String) -> RangeError {
    RangeError {
        input: input.to_owned(),
        reason,
        position: Some(char_position(input, byte_pos)),
    }
}

/// Builds an error about the string as a whole.
pub(super) fn error_whole(input: &str, reason: String) -> RangeError {
    RangeError {
        input: input.to_owned(),
        reason,
        position: None,
    }
}

/// The character offset of byte offset `byte_pos` in `input`.
pub(super) fn char_position(input: &str, byte_pos: usize) -> usize {
    input
        .char_indices()
        .take_while(|(index, _)| *index < byte_pos)
        .count()
}

/// Describes the character at `byte_pos` for an error message (`'@'`, `'\t'`, `end of input`).
pub(super) fn describe_at(input: &str, byte_pos: usize) -> String {
    match input.get(byte_pos..).and_then(|rest| rest.chars().next()) {
        Some(c) => format!("{c:?}"),
        None => "the end of the range".to_owned(),
    }
}

/// Whitespace as Go's RE2 `\s` defines it, which is what Masterminds splits on.
pub(super) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\r' | b'\x0C')
}

/// A position in a range string with one-byte lookahead.
pub(super) struct Cursor<'a> {
    bytes: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Cursor<'a> {
    /// A cursor over `input[start..end]`, reporting positions relative to the whole `input`.
    pub(super) fn new(input: &'a str, start: usize, end: usize) -> Self {
        Cursor {
            bytes: input.as_bytes(),
            pos: start,
            end: end.min(input.len()),
        }
    }

    pub(super) fn pos(&self) -> usize {
        self.pos
    }

    pub(super) fn at_end(&self) -> bool {
        self.pos >= self.end
    }

    pub(super) fn peek(&self) -> Option<u8> {
        if self.at_end() {
            None
        } else {
            self.bytes.get(self.pos).copied()
        }
    }

    pub(super) fn peek_at(&self, offset: usize) -> Option<u8> {
        let index = self.pos.checked_add(offset)?;
        if index >= self.end {
            None
        } else {
            self.bytes.get(index).copied()
        }
    }

    pub(super) fn bump(&mut self) {
        if !self.at_end() {
            self.pos += 1;
        }
    }

    /// Consumes bytes while `accept` holds and returns how many were consumed.
    pub(super) fn eat_while(&mut self, accept: impl Fn(u8) -> bool) -> usize {
        let start = self.pos;
        while let Some(b) = self.peek() {
            if !accept(b) {
                break;
            }
            self.pos += 1;
        }
        self.pos - start
    }

    /// Consumes whitespace and returns how much there was.
    pub(super) fn skip_space(&mut self) -> usize {
        self.eat_while(is_space)
    }
}
