//! One Masterminds/semver v3 comparator (`>=1.2.x`, `~1.2.3`, `!=1.x`) and how it judges a
//! version.
//!
//! Masterminds does not lower `1.2.x` or `^0.2` to plain bounds before checking; each operator
//! looks at the wildcard level of its version itself, and some of those checks (`!=1.x`, a major
//! wildcard under `^` or `<=`) cannot be written as an AND of plain bounds. So a comparator keeps
//! the operator and the partial version, and [`Comparator::admits`] applies the operator's rule.
//! The rules below are facts read from Masterminds/semver v3.4 `constraints.go` and checked
//! against `testdata/version-ranges/cases.json`; `Version` precedence ignores build metadata.

use std::cmp::Ordering;
use std::fmt;

use semver::{Prerelease, Version};

/// A Masterminds operator after aliases are folded (`=>` is `>=`, `=<` is `<=`, `~>` is `~`,
/// a bare version is `=`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Op {
    Eq,
    Ne,
    Gt,
    Ge,
    Lt,
    Le,
    Tilde,
    Caret,
}

impl Op {
    /// The operator for the spelling in a range, or `None` when it is not a Masterminds one.
    pub(super) fn from_symbol(symbol: &str) -> Option<Op> {
        Some(match symbol {
            "" | "=" => Op::Eq,
            "!=" => Op::Ne,
            ">" => Op::Gt,
            ">=" | "=>" => Op::Ge,
            "<" => Op::Lt,
            "<=" | "=<" => Op::Le,
            "~" | "~>" => Op::Tilde,
            "^" => Op::Caret,
            _ => return None,
        })
    }

    fn symbol(self) -> &'static str {
        match self {
            Op::Eq => "=",
            Op::Ne => "!=",
            Op::Gt => ">",
            Op::Ge => ">=",
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Tilde => "~",
            Op::Caret => "^",
        }
    }
}

/// Which leading part of a version is the last one given; the rest are wildcards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Wildcard {
    /// `1.2.3`: nothing is a wildcard.
    None,
    /// `1.2`, `1.2.x`: the patch is open.
    Patch,
    /// `1`, `1.x`: minor and patch are open.
    Minor,
    /// `*`, `x`: everything is open.
    Major,
}

/// A version as written in a Masterminds range: leading parts, possibly a pre-release, and the
/// wildcard level. Missing parts are 0 in [`PartialVersion::floor`]. Build metadata is dropped at
/// parse time because no Masterminds check looks at it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct PartialVersion {
    pub(super) major: u64,
    pub(super) minor: u64,
    pub(super) patch: u64,
    pub(super) pre: Prerelease,
    pub(super) wildcard: Wildcard,
}

impl PartialVersion {
    /// The lowest version the partial names: open parts are 0, the pre-release is kept.
    pub(super) fn floor(&self) -> Version {
        Version {
            pre: self.pre.clone(),
            ..Version::new(self.major, self.minor, self.patch)
        }
    }

    /// The same version with every open part pinned to 0 (`1.2.x` becomes `1.2.0`).
    pub(super) fn closed(mut self) -> Self {
        match self.wildcard {
            Wildcard::None => {}
            Wildcard::Patch => self.patch = 0,
            Wildcard::Minor => (self.minor, self.patch) = (0, 0),
            Wildcard::Major => (self.major, self.minor, self.patch) = (0, 0, 0),
        }
        self.wildcard = Wildcard::None;
        self
    }
}

impl fmt::Display for PartialVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.wildcard {
            Wildcard::None => write!(f, "{}.{}.{}", self.major, self.minor, self.patch)?,
            Wildcard::Patch => write!(f, "{}.{}.x", self.major, self.minor)?,
            Wildcard::Minor => write!(f, "{}.x", self.major)?,
            Wildcard::Major => f.write_str("*")?,
        }
        if !self.pre.is_empty() {
            write!(f, "-{}", self.pre)?;
        }
        Ok(())
    }
}

/// One comparator of an AND group.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(super) struct Comparator {
    pub(super) op: Op,
    pub(super) version: PartialVersion,
}

impl Comparator {
    /// Builds a comparator in canonical form: `>=` and `<` ignore wildcards in Masterminds
    /// (`>=1.2.x` is `>=1.2.0`, `<1.x` is `<1.0.0`), so their version is stored closed and two
    /// spellings of the same check compare equal.
    pub(super) fn new(op: Op, version: PartialVersion) -> Self {
        let version = match op {
            Op::Ge | Op::Lt => version.closed(),
            _ => version,
        };
        Comparator { op, version }
    }

    /// Whether this comparator's version carries a pre-release, which admits pre-release
    /// versions into its whole AND group.
    pub(super) fn has_prerelease(&self) -> bool {
        !self.version.pre.is_empty()
    }

    /// Whether `v` passes this comparator, leaving out the AND group's pre-release admission
    /// (checked once per group by the caller).
    pub(super) fn admits(&self, v: &Version) -> bool {
        let p = &self.version;
        let floor = p.floor();
        let order = v.cmp_precedence(&floor);
        let major_minor = (v.major, v.minor).cmp(&(p.major, p.minor));
        match self.op {
            Op::Lt => order == Ordering::Less,
            Op::Ge => order != Ordering::Less,
            // `>1.2` is "a later minor", `>1` "a later major"; `>*` is plain `>0.0.0`.
            Op::Gt => match p.wildcard {
                Wildcard::None | Wildcard::Major => order == Ordering::Greater,
                Wildcard::Patch => major_minor == Ordering::Greater,
                Wildcard::Minor => v.major > p.major,
            },
            // `<=1.2` is "this minor or lower", `<=2.x` "major 2 or lower"; Masterminds treats a
            // major wildcard like minor 0.0 here, so `<=*` admits only 0.0.z.
            Op::Le => match p.wildcard {
                Wildcard::None => order != Ordering::Greater,
                Wildcard::Patch | Wildcard::Major => major_minor != Ordering::Greater,
                Wildcard::Minor => v.major <= p.major,
            },
            // A bare or `=` version with a wildcard is a tilde range.
            Op::Eq => match p.wildcard {
                Wildcard::None => order == Ordering::Equal,
                _ => self.tilde_admits(v, order),
            },
            Op::Tilde => self.tilde_admits(v, order),
            // `!=1.x` excludes major 1; `!=1.2.x` excludes minor 1.2 unless the pre-releases
            // differ; `!=*` is plain `!=0.0.0`.
            Op::Ne => match p.wildcard {
                Wildcard::None | Wildcard::Major => order != Ordering::Equal,
                Wildcard::Minor => v.major != p.major,
                Wildcard::Patch => major_minor != Ordering::Equal || v.pre != p.pre,
            },
            Op::Caret => self.caret_admits(v, order),
        }
    }

    /// `~1.2.3` = `>=1.2.3 <1.3.0-0`, `~1` = `>=1.0.0 <2.0.0-0`; `~0.0.0` and `~*` admit all.
    fn tilde_admits(&self, v: &Version, order: Ordering) -> bool {
        let p = &self.version;
        if order == Ordering::Less {
            return false;
        }
        let open_minor = p.wildcard == Wildcard::Minor;
        let all_zero = p.major == 0 && p.minor == 0 && p.patch == 0;
        if all_zero && matches!(p.wildcard, Wildcard::None | Wildcard::Major) {
            return true;
        }
        v.major == p.major && (open_minor || v.minor == p.minor)
    }

    /// `^1.2.3` = same major; `^0.2.3` = same 0.minor; `^0.0.3` = exactly 0.0.3; `^0.0` =
    /// 0.0.z; `^0` = 0.y.z. A major wildcard (`^*`) falls through to the `^0.0.0` rule and admits
    /// only 0.0.0, as Masterminds' code does (its comment says "any").
    fn caret_admits(&self, v: &Version, order: Ordering) -> bool {
        let p = &self.version;
        if order == Ordering::Less {
            return false;
        }
        if p.major > 0 || p.wildcard == Wildcard::Minor {
            return v.major == p.major;
        }
        if v.major != 0 {
            return false;
        }
        if p.minor > 0 || p.wildcard == Wildcard::Patch {
            return v.minor == p.minor;
        }
        v.minor == 0 && v.patch == p.patch
    }
}

impl fmt::Display for Comparator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // "Any version" reads better as `*` than as `=*`; it re-parses to the same comparator.
        if self.op == Op::Eq && self.version.wildcard == Wildcard::Major {
            return write!(f, "{}", self.version);
        }
        write!(f, "{}{}", self.op.symbol(), self.version)
    }
}
