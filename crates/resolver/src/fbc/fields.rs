//! Case-insensitive, collision-checked decoding of FBC objects.
//!
//! operator-registry decodes blobs with Go's `encoding/json`, which matches object keys to
//! struct fields case-insensitively, and it rejects top-level keys that collide once folded
//! (contracts §7.1). serde's derive matches keys exactly, so the wire types are declared with
//! [`wire_struct!`], which generates a `Deserialize` impl that folds case, refuses two keys
//! landing on the same field, skips unknown keys without allocating, and names the field in
//! every type error (through [`FieldValue`]).
//!
//! Strings are [`Str`]s: borrowed from the input when it has no escapes, so the hot JSON path
//! allocates only for what the model keeps.

use std::borrow::Cow;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeSeed, Deserializer, SeqAccess, Visitor};

/// A string borrowed from the input when possible.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Str<'de>(pub(crate) Cow<'de, str>);

impl Str<'_> {
    pub(crate) fn as_str(&self) -> &str {
        &self.0
    }

    pub(crate) fn into_string(self) -> String {
        self.0.into_owned()
    }
}

/// Whether `key` names `field` under Go's case folding (ASCII fast path, Unicode otherwise).
pub(crate) fn fold_eq(key: &str, field: &str) -> bool {
    if key.len() == field.len() && key.eq_ignore_ascii_case(field) {
        return true;
    }
    if key.is_ascii() {
        return false;
    }
    let mut a = key.chars();
    let mut b = field.chars();
    loop {
        match (a.next(), b.next()) {
            (None, None) => return true,
            (Some(x), Some(y)) => {
                let same = x == y
                    || x.to_lowercase().eq(y.to_lowercase())
                    || x.to_uppercase().eq(y.to_uppercase());
                if !same {
                    return false;
                }
            }
            _ => return false,
        }
    }
}

/// Case-folds a key for collision checks between keys the wire type does not know.
pub(crate) fn fold(key: &str) -> String {
    if key.is_ascii() {
        key.to_ascii_lowercase()
    } else {
        key.chars()
            .flat_map(char::to_uppercase)
            .flat_map(char::to_lowercase)
            .collect()
    }
}

/// A value that can be decoded as the value of a named field, with errors naming the field.
///
/// `Ok(None)` means the field was `null`, which Go treats as absent.
pub(crate) trait FieldValue<'de>: Sized {
    fn deserialize_field<D: Deserializer<'de>>(
        deserializer: D,
        field: &'static str,
    ) -> Result<Option<Self>, D::Error>;
}

/// Seed carrying the field name into [`FieldValue::deserialize_field`].
pub(crate) struct FieldSeed<T> {
    pub(crate) field: &'static str,
    pub(crate) marker: PhantomData<T>,
}

impl<'de, T: FieldValue<'de>> DeserializeSeed<'de> for FieldSeed<T> {
    type Value = Option<T>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        T::deserialize_field(deserializer, self.field)
    }
}

struct StrVisitor {
    field: &'static str,
}

impl<'de> Visitor<'de> for StrVisitor {
    type Value = Option<Str<'de>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a string for field `{}`", self.field)
    }

    fn visit_borrowed_str<E: de::Error>(self, v: &'de str) -> Result<Self::Value, E> {
        Ok(Some(Str(Cow::Borrowed(v))))
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
        Ok(Some(Str(Cow::Owned(v.to_owned()))))
    }

    fn visit_string<E: de::Error>(self, v: String) -> Result<Self::Value, E> {
        Ok(Some(Str(Cow::Owned(v))))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_str(self)
    }
}

impl<'de> FieldValue<'de> for Str<'de> {
    fn deserialize_field<D: Deserializer<'de>>(
        deserializer: D,
        field: &'static str,
    ) -> Result<Option<Self>, D::Error> {
        deserializer.deserialize_option(StrVisitor { field })
    }
}

struct BoolVisitor {
    field: &'static str,
}

impl<'de> Visitor<'de> for BoolVisitor {
    type Value = Option<bool>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "true or false for field `{}`", self.field)
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Self::Value, E> {
        Ok(Some(v))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_bool(self)
    }
}

impl<'de> FieldValue<'de> for bool {
    fn deserialize_field<D: Deserializer<'de>>(
        deserializer: D,
        field: &'static str,
    ) -> Result<Option<Self>, D::Error> {
        deserializer.deserialize_option(BoolVisitor { field })
    }
}

/// A value kept as its JSON text: from a JSON stream the bytes are copied verbatim (one
/// allocation, no tree); from YAML the already-built `Value` is printed back compactly. `null`
/// is kept as the text `null`, so nothing the catalog wrote is lost.
impl<'de> FieldValue<'de> for Box<serde_json::value::RawValue> {
    fn deserialize_field<D: Deserializer<'de>>(
        deserializer: D,
        _field: &'static str,
    ) -> Result<Option<Self>, D::Error> {
        serde::Deserialize::deserialize(deserializer).map(Some)
    }
}

struct SeqVisitor<T> {
    field: &'static str,
    marker: PhantomData<T>,
}

impl<'de, T: FieldValue<'de>> Visitor<'de> for SeqVisitor<T> {
    type Value = Option<Vec<T>>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a list for field `{}`", self.field)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut items = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(item) = seq.next_element_seed(FieldSeed::<T> {
            field: self.field,
            marker: PhantomData,
        })? {
            // A `null` item carries nothing (Go would decode a zero value and ignore it).
            if let Some(item) = item {
                items.push(item);
            }
        }
        Ok(Some(items))
    }

    fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_seq(self)
    }
}

impl<'de, T: FieldValue<'de>> FieldValue<'de> for Vec<T> {
    fn deserialize_field<D: Deserializer<'de>>(
        deserializer: D,
        field: &'static str,
    ) -> Result<Option<Self>, D::Error> {
        deserializer.deserialize_option(SeqVisitor {
            field,
            marker: PhantomData,
        })
    }
}

/// A key as seen by a wire type: the index of the field it folds to, or unknown.
pub(crate) enum Key {
    Field(usize),
    /// Unknown key, folded, kept only when the wire type checks collisions on all keys.
    Unknown(Option<String>),
}

/// Resolves a key against a wire type's field names without allocating for known keys.
pub(crate) struct KeySeed {
    pub(crate) fields: &'static [&'static str],
    pub(crate) keep_unknown: bool,
}

impl<'de> DeserializeSeed<'de> for KeySeed {
    type Value = Key;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Key, D::Error> {
        deserializer.deserialize_identifier(self)
    }
}

impl<'de> Visitor<'de> for KeySeed {
    type Value = Key;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a string key")
    }

    fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
        // Exact matches first (the common case), then folded ones, as Go prefers exact.
        if let Some(index) = self.fields.iter().position(|f| *f == v) {
            return Ok(Key::Field(index));
        }
        if let Some(index) = self.fields.iter().position(|f| fold_eq(v, f)) {
            return Ok(Key::Field(index));
        }
        Ok(Key::Unknown(self.keep_unknown.then(|| fold(v))))
    }

    fn visit_bytes<E: de::Error>(self, v: &[u8]) -> Result<Key, E> {
        match std::str::from_utf8(v) {
            Ok(s) => self.visit_str(s),
            Err(_) => Ok(Key::Unknown(None)),
        }
    }

    // YAML keys may be numbers or booleans; they can never name a field.
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Key, E> {
        Ok(Key::Unknown(self.keep_unknown.then(|| v.to_string())))
    }

    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Key, E> {
        Ok(Key::Unknown(self.keep_unknown.then(|| v.to_string())))
    }

    fn visit_bool<E: de::Error>(self, v: bool) -> Result<Key, E> {
        Ok(Key::Unknown(self.keep_unknown.then(|| v.to_string())))
    }
}

/// Error text for two keys that fold to the same name (kept identical for every wire type).
pub(crate) fn collision_message(what: &str, key: &str) -> String {
    format!(
        "{what} has two keys that both mean `{key}` once upper/lower case is ignored \
         (operator-registry matches keys case-insensitively); keep only one"
    )
}

/// Declares a wire type: every field optional, keys matched case-insensitively.
///
/// `check_all_keys` also rejects collisions between keys the type does not interpret (the
/// top-level blob does this, as operator-registry's `Meta` does).
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident<$lt:lifetime> ($what:literal, check_all_keys = $all:literal) {
            $( $field:ident : $ty:ty => $key:literal ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Default)]
        $vis struct $name<$lt> {
            $( pub(crate) $field: Option<$ty>, )*
            _borrow: ::std::marker::PhantomData<&$lt ()>,
        }

        impl<$lt> ::serde::Deserialize<$lt> for $name<$lt> {
            fn deserialize<D: ::serde::Deserializer<$lt>>(deserializer: D) -> Result<Self, D::Error> {
                const FIELDS: &[&str] = &[$($key),*];
                struct WireVisitor<$lt>(::std::marker::PhantomData<&$lt ()>);

                impl<$lt> ::serde::de::Visitor<$lt> for WireVisitor<$lt> {
                    type Value = $name<$lt>;

                    fn expecting(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                        f.write_str($what)
                    }

                    #[allow(unused_mut, unused_variables, unused_assignments)]
                    fn visit_map<A: ::serde::de::MapAccess<$lt>>(self, mut map: A) -> Result<Self::Value, A::Error> {
                        let mut out = $name::default();
                        let mut seen: u64 = 0;
                        let mut unknown: Vec<String> = Vec::new();
                        while let Some(key) = map.next_key_seed($crate::fbc::fields::KeySeed {
                            fields: FIELDS,
                            keep_unknown: $all,
                        })? {
                            match key {
                                $crate::fbc::fields::Key::Field(index) => {
                                    let bit = 1u64 << (index % 64);
                                    if seen & bit != 0 {
                                        return Err(::serde::de::Error::custom(
                                            $crate::fbc::fields::collision_message($what, FIELDS[index]),
                                        ));
                                    }
                                    seen |= bit;
                                    let mut i = 0usize;
                                    $(
                                        if i == index {
                                            out.$field = map.next_value_seed($crate::fbc::fields::FieldSeed::<$ty> {
                                                field: $key,
                                                marker: ::std::marker::PhantomData,
                                            })?;
                                            continue;
                                        }
                                        i += 1;
                                    )*
                                    map.next_value::<::serde::de::IgnoredAny>()?;
                                }
                                $crate::fbc::fields::Key::Unknown(folded) => {
                                    if let Some(folded) = folded {
                                        if unknown.contains(&folded) {
                                            return Err(::serde::de::Error::custom(
                                                $crate::fbc::fields::collision_message($what, &folded),
                                            ));
                                        }
                                        unknown.push(folded);
                                    }
                                    map.next_value::<::serde::de::IgnoredAny>()?;
                                }
                            }
                        }
                        Ok(out)
                    }
                }

                deserializer.deserialize_map(WireVisitor(::std::marker::PhantomData))
            }
        }

        impl<$lt> $crate::fbc::fields::FieldValue<$lt> for $name<$lt> {
            fn deserialize_field<D: ::serde::Deserializer<$lt>>(
                deserializer: D,
                _field: &'static str,
            ) -> Result<Option<Self>, D::Error> {
                <Option<Self> as ::serde::Deserialize>::deserialize(deserializer)
            }
        }
    };
}

pub(crate) use wire_struct;
