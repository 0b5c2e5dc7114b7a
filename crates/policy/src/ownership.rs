//! Whose an object on the cluster is, judged before a bundle writes it (§6: objects POM did
//! not create are never adopted silently; two POs never own one object).
//!
//! Pure: the controller reads the object's owner and package labels and its adoption
//! annotation, and knows which PlatformOperators exist; [`judge`] says whether this PO may
//! write it.

use pom_api::labels::label_value;

/// What the object carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LiveOwnership<'a> {
    /// `platform.openshift.io/owner`.
    pub owner: Option<&'a str>,
    /// `platform.openshift.io/package`.
    pub package: Option<&'a str>,
    /// `platform.openshift.io/adopt` (a PlatformOperator's name, set by an admin).
    pub adopt: Option<&'a str>,
}

/// The verdict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ownership {
    /// This PO's already.
    Ours,
    /// Taken over: an admin handed it to this PO, or its owner PO is gone and it belongs to
    /// the same package (CRDs outlive their PO by design; the next PO of the package takes
    /// them over instead of failing forever on a name that no longer exists).
    Adopt,
    /// Another existing PO's.
    OwnedBy(String),
    /// Not POM's, and not handed over.
    NotPoms,
}

/// Whether `po` (of `package`) may write an object carrying `live`; `po_exists` says whether
/// a PlatformOperator with a given owner-label value exists.
#[must_use]
pub fn judge(
    live: LiveOwnership<'_>,
    po: &str,
    package: &str,
    po_exists: impl Fn(&str) -> bool,
) -> Ownership {
    let ours = label_value(po);
    match live.owner {
        Some(owner) if owner == ours => Ownership::Ours,
        Some(owner) if !po_exists(owner) && live.package == Some(&label_value(package)) => {
            Ownership::Adopt
        }
        Some(owner) => Ownership::OwnedBy(owner.to_owned()),
        None if live.adopt == Some(po) => Ownership::Adopt,
        None => Ownership::NotPoms,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_ownership_table() {
        let live = |owner, package, adopt| LiveOwnership {
            owner,
            package,
            adopt,
        };
        let exists = |name: &str| name == "other";
        let cases = [
            (
                "ours",
                live(Some("mine"), Some("pkg"), None),
                Ownership::Ours,
            ),
            (
                "another live PO's",
                live(Some("other"), Some("pkg"), None),
                Ownership::OwnedBy("other".into()),
            ),
            (
                "a gone PO's, same package: freed",
                live(Some("deleted"), Some("pkg"), None),
                Ownership::Adopt,
            ),
            (
                "a gone PO's, another package: not ours to take",
                live(Some("deleted"), Some("elsewhere"), None),
                Ownership::OwnedBy("deleted".into()),
            ),
            (
                "a gone PO's, no package label",
                live(Some("deleted"), None, None),
                Ownership::OwnedBy("deleted".into()),
            ),
            (
                "not POM's, handed over",
                live(None, None, Some("mine")),
                Ownership::Adopt,
            ),
            (
                "not POM's, handed to someone else",
                live(None, None, Some("other")),
                Ownership::NotPoms,
            ),
            ("not POM's", live(None, None, None), Ownership::NotPoms),
        ];
        for (case, live, want) in cases {
            assert_eq!(judge(live, "mine", "pkg", exists), want, "{case}");
        }
    }
}
