//! Image references parsed without a regular expression.
//!
//! Why: oci-spec parses a reference with one large regex whose tag part is Unicode `\w`
//! repeated up to 128 times. Compiling it costs the process about 7 MiB for its whole life,
//! and every thread that parses a reference keeps about 2.6 MiB of matching state: measured
//! with heaptrack on the manager, 19 of its 23 MiB of heap with a catalog and 10
//! PlatformOperators (`docs/benchmarks.md`, "The manager's RSS with a 150 MB catalog image").
//!
//! This parser accepts exactly what the OCI distribution grammar (as oci-spec and
//! distribution/reference write it) accepts, with one deliberate difference: tags are ASCII,
//! as the OCI distribution specification defines them (`[a-zA-Z0-9_][a-zA-Z0-9._-]{0,127}`),
//! where oci-spec's regex lets any Unicode word character in. The result is built with
//! oci-spec's own constructors and domain rules (`docker.io`, `library/`, the default tag),
//! and every error is the one oci-spec gives. `tests` compares both on generated references.

use oci_client::{ParseError, Reference};

/// Repository names longer than this are refused (oci-spec's and distribution's limit).
const NAME_TOTAL_LENGTH_MAX: usize = 255;
const DOCKER_HUB_DOMAIN: &str = "docker.io";
const DOCKER_HUB_DOMAIN_LEGACY: &str = "index.docker.io";
const DOCKER_HUB_OFFICIAL_REPO_NAME: &str = "library";
const DEFAULT_TAG: &str = "latest";
/// A tag is one word character then at most this many word characters, dots and dashes.
const TAG_MAX_TAIL: usize = 127;

/// Parses `text` as an image reference: `[domain[:port]/]path[:tag][@digest]`.
///
/// # Errors
/// The [`ParseError`] oci-spec gives for the same text.
pub(crate) fn parse_reference(text: &str) -> Result<Reference, ParseError> {
    if text.is_empty() {
        return Err(ParseError::NameEmpty);
    }
    let (rest, digest) = match text.split_once('@') {
        Some((rest, digest)) if is_digest(digest) => (rest, Some(digest)),
        Some(_) => return Err(ParseError::ReferenceInvalidFormat),
        None => (text, None),
    };
    // A tag follows the last `:` when no `/` comes after it (`host:5000/repo` has none).
    let (name, tag) = match rest.rsplit_once(':') {
        Some((name, tag)) if !tag.contains('/') => (name, Some(tag)),
        _ => (rest, None),
    };
    if !is_name(name) || !tag.is_none_or(is_tag) {
        return Err(ParseError::ReferenceInvalidFormat);
    }
    let (registry, repository) = split_domain(name);
    if repository.len() > NAME_TOTAL_LENGTH_MAX {
        return Err(ParseError::NameTooLong);
    }
    if let Some(digest) = digest {
        check_digest_length(digest)?;
    }
    Ok(match (tag, digest) {
        (Some(tag), Some(digest)) => {
            Reference::with_tag_and_digest(registry, repository, tag.to_owned(), digest.to_owned())
        }
        (None, Some(digest)) => Reference::with_digest(registry, repository, digest.to_owned()),
        (tag, None) => {
            Reference::with_tag(registry, repository, tag.unwrap_or(DEFAULT_TAG).to_owned())
        }
    })
}

/// `[domain "/"] path ("/" path)*`: the first component is a domain when it can be one and a
/// path follows (the regex tries that first), or a path component like the others.
fn is_name(name: &str) -> bool {
    let mut components = name.split('/');
    let first = components.next().unwrap_or_default();
    let rest: Vec<&str> = components.collect();
    let rest_are_paths = rest.iter().all(|c| is_path_component(c));
    (is_domain(first) && !rest.is_empty() && rest_are_paths)
        || (is_path_component(first) && rest_are_paths)
}

/// `domain-component ("." domain-component)* [":" [0-9]+]`.
fn is_domain(domain: &str) -> bool {
    let (host, port) = match domain.split_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (domain, None),
    };
    host.split('.').all(is_domain_component)
        && port.is_none_or(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
}

/// `[a-zA-Z0-9]` or `[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9]`.
fn is_domain_component(component: &str) -> bool {
    let bytes = component.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|b| b.is_ascii_alphanumeric() || *b == b'-')
        }
        _ => false,
    }
}

/// `[a-z0-9]+ (separator [a-z0-9]+)*`, where a separator is `.`, `_`, `__` or any run of `-`
/// (including none, which only joins alphanumerics).
fn is_path_component(component: &str) -> bool {
    let is_alnum = |b: u8| b.is_ascii_lowercase() || b.is_ascii_digit();
    let bytes = component.as_bytes();
    if !bytes.first().is_some_and(|b| is_alnum(*b)) || !bytes.last().is_some_and(|b| is_alnum(*b)) {
        return false;
    }
    let mut i = 0;
    while i < bytes.len() {
        let b = bytes.get(i).copied().unwrap_or_default();
        if is_alnum(b) {
            i += 1;
            continue;
        }
        // A separator: one `.`, one or two `_`, or dashes; an alphanumeric must follow.
        let run_end = match b {
            b'.' => i + 1,
            b'_' if bytes.get(i + 1) == Some(&b'_') => i + 2,
            b'_' => i + 1,
            b'-' => i + bytes.iter().skip(i).take_while(|c| **c == b'-').count(),
            _ => return false,
        };
        if !bytes.get(run_end).is_some_and(|c| is_alnum(*c)) {
            return false;
        }
        i = run_end;
    }
    true
}

/// `[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}` (ASCII: see the module documentation).
fn is_tag(tag: &str) -> bool {
    let word = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_';
    let bytes = tag.as_bytes();
    bytes.first().is_some_and(word)
        && bytes.len() <= 1 + TAG_MAX_TAIL
        && bytes.iter().all(|b| word(b) || *b == b'.' || *b == b'-')
}

/// `algorithm ":" hex{32,}`, where an algorithm is `[A-Za-z][A-Za-z0-9]*` parts joined by
/// `-`, `_`, `+` or `.`.
fn is_digest(digest: &str) -> bool {
    let Some((algorithm, hex)) = digest.split_once(':') else {
        return false;
    };
    hex.len() >= 32
        && hex.bytes().all(|b| b.is_ascii_hexdigit())
        && algorithm.split(['-', '_', '+', '.']).all(|part| {
            part.as_bytes().first().is_some_and(u8::is_ascii_alphabetic)
                && part.bytes().all(|b| b.is_ascii_alphanumeric())
        })
}

/// oci-spec's checks after the grammar: the hex length each algorithm needs.
fn check_digest_length(digest: &str) -> Result<(), ParseError> {
    let (algorithm, hex) = digest
        .split_once(':')
        .ok_or(ParseError::DigestInvalidFormat)?;
    let want = match algorithm {
        "sha256" => 64,
        "sha384" => 96,
        "sha512" => 128,
        _ => return Err(ParseError::DigestUnsupported),
    };
    if hex.len() == want {
        Ok(())
    } else {
        Err(ParseError::DigestInvalidLength)
    }
}

/// Docker's domain rules (distribution's `splitDockerDomain`, as oci-spec applies them): no
/// domain means `docker.io`, and a one-component Docker Hub name is under `library/`.
fn split_domain(name: &str) -> (String, String) {
    let (mut domain, mut remainder) = match name.split_once('/') {
        Some((left, right)) if left.contains(['.', ':']) || left == "localhost" => {
            (left.to_owned(), right.to_owned())
        }
        _ => (DOCKER_HUB_DOMAIN.to_owned(), name.to_owned()),
    };
    if domain == DOCKER_HUB_DOMAIN_LEGACY {
        DOCKER_HUB_DOMAIN.clone_into(&mut domain);
    }
    if domain == DOCKER_HUB_DOMAIN && !remainder.contains('/') {
        remainder = format!("{DOCKER_HUB_OFFICIAL_REPO_NAME}/{remainder}");
    }
    (domain, remainder)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use proptest::prelude::*;

    /// oci-spec's parser (the regex): the reference this module must agree with.
    fn oci_spec(text: &str) -> Result<Reference, ParseError> {
        text.parse::<Reference>()
    }

    #[test]
    fn references_catalogs_and_bundles_use() {
        let digest = format!("sha256:{}", "a".repeat(64));
        for text in [
            "busybox".to_owned(),
            "quay.io/operatorhubio/catalog:latest".to_owned(),
            "registry.redhat.io/redhat/redhat-operator-index:v4.20".to_owned(),
            format!("quay.io/org/bundle@{digest}"),
            format!("127.0.0.1:5000/pom/catalog:v1@{digest}"),
            "localhost:5000/repo".to_owned(),
            "localhost/repo:tag".to_owned(),
            "index.docker.io/library/ubuntu:22.04".to_owned(),
            "test.com:5000".to_owned(),
            "a__b/c---d/e.f_g:T.a-g_1".to_owned(),
        ] {
            assert_eq!(parse_reference(&text), oci_spec(&text), "{text}");
            assert!(parse_reference(&text).is_ok(), "{text}");
        }
    }

    #[test]
    fn refusals_are_oci_specs() {
        let hex = "a".repeat(64);
        for text in [
            String::new(),
            "upper/CASE".to_owned(),
            "repo:".to_owned(),
            "repo@sha256:abc".to_owned(),
            format!("repo@sha256:{}", "a".repeat(63)),
            format!("repo@md5:{hex}"),
            format!("repo@sha512:{hex}"),
            format!("{}:t", "a".repeat(256)),
            "a/-b".to_owned(),
            "a/b_".to_owned(),
            "a/b___c".to_owned(),
            "-host.com/a".to_owned(),
            "host.com:/a".to_owned(),
            format!("repo:{}", "t".repeat(129)),
            "repo:.tag".to_owned(),
            "a//b".to_owned(),
            "a b".to_owned(),
        ] {
            assert_eq!(parse_reference(&text), oci_spec(&text), "{text:?}");
            assert!(parse_reference(&text).is_err(), "{text:?}");
        }
        // The one difference: tags are ASCII here, as the distribution spec defines them.
        assert!(oci_spec("repo:tagé").is_ok());
        assert_eq!(
            parse_reference("repo:tagé"),
            Err(ParseError::ReferenceInvalidFormat)
        );
    }

    fn component() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z0-9]{1,4}([._-]{1,3}[a-z0-9]{1,3}){0,2}",
            "[a-zA-Z0-9._-]{0,6}",
            // Dots escaped: an unescaped `.` is any character, non-ASCII included, where
            // oci-spec's Unicode `\w` and POM's ASCII rules differ (a flaky failure once).
            "(localhost|index\\.docker\\.io|docker\\.io|quay\\.io|Reg-1\\.example\\.com)(:[0-9]{0,5})?",
        ]
    }

    fn reference() -> impl Strategy<Value = String> {
        (
            prop::collection::vec(component(), 1..4),
            prop::option::of("[a-zA-Z0-9_.-]{0,12}"),
            prop::option::of((
                prop_oneof!["sha256", "sha384", "sha512", "sha1", "sha256+b64", "x.y"],
                prop_oneof![Just(32usize), Just(64), Just(96), Just(128), 0..130usize],
                "[0-9a-fA-Fg]",
            )),
        )
            .prop_map(|(components, tag, digest)| {
                let mut text = components.join("/");
                if let Some(tag) = tag {
                    text = format!("{text}:{tag}");
                }
                if let Some((algorithm, len, fill)) = digest {
                    text = format!("{text}@{algorithm}:{}", fill.repeat(len));
                }
                text
            })
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 4_000, ..ProptestConfig::default() })]

        #[test]
        fn agrees_with_oci_spec(text in reference()) {
            prop_assert_eq!(parse_reference(&text), oci_spec(&text), "{:?}", text);
        }

        #[test]
        fn agrees_with_oci_spec_on_any_ascii(text in "[ -~]{0,24}") {
            prop_assert_eq!(parse_reference(&text), oci_spec(&text), "{:?}", text);
        }
    }
}
