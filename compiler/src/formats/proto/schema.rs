//! The form of hlatc's proto table ([`super::messages`]): the [`messages!`]
//! macro takes each message's fields once, by number, name and type, and
//! makes of them both the prost struct that encodes and decodes it and
//! the [`Schema`] the wire walk ([`super::wire`]) checks incoming bytes
//! against, so the two cannot disagree on a field.

use std::collections::BTreeMap;

/// One protobuf message as hlatc models it, for the wire walk.
// `pub` (in a private module) for `messages::DECLARED`, which the
// crate's tests read.
pub struct Schema {
    /// XLA's name for it, nested messages under their parent's
    /// (`HloInstructionProto.SliceDimensions`), for errors.
    pub name: &'static str,
    pub fields: &'static [FieldSchema],
    /// XLA's names for fields hlatc does not model, for errors.
    pub unmodeled: &'static [(u32, &'static str)],
}

// `pub` as `Schema` is.
pub struct FieldSchema {
    pub number: u32,
    pub name: &'static str,
    /// The schema of the message the field holds, if it holds one. A
    /// function: each message's schema is a static inside its
    /// [`Modeled::schema`], which a table entry cannot name.
    pub nested: fn() -> Option<&'static Schema>,
}

/// A message the table declares.
pub(crate) trait Modeled {
    fn schema() -> &'static Schema;
}

/// A field's Rust type: the schema of the message it holds, if any.
pub(crate) trait FieldType {
    fn nested() -> Option<&'static Schema> {
        None
    }
}

macro_rules! scalar_fields {
    ($($ty:ty),*) => { $(impl FieldType for $ty {})* };
}

scalar_fields!(bool, i32, i64, u32, u64, f32, f64, u8, String);

/// A repeated, optional or boxed field holds what its element does.
macro_rules! wrapper_fields {
    ($($wrapper:ident),*) => {
        $(impl<T: FieldType> FieldType for $wrapper<T> {
            fn nested() -> Option<&'static Schema> {
                T::nested()
            }
        })*
    };
}

wrapper_fields!(Vec, Option, Box);

/// A map field, whose entries are messages of a key (1) and a value (2).
pub(crate) trait MapField {
    type Key: FieldType;
    type Value: FieldType;
}

impl<K: FieldType, V: FieldType> MapField for BTreeMap<K, V> {
    type Key = K;
    type Value = V;
}

/// A field's protobuf name: its Rust name, less the `r#` of a keyword
/// (`r#type`).
pub(crate) const fn proto_name(rust: &'static str) -> &'static str {
    match rust.as_bytes() {
        [b'r', b'#', rest @ ..] => match std::str::from_utf8(rest) {
            Ok(name) => name,
            Err(_) => rust,
        },
        _ => rust,
    }
}

/// Declares messages, each as
///
/// ```text
/// /// docs
/// message RustName as "XlaName" {  // `as` when the names differ
///     /// docs
///     TAG field: RustType [prost kind] entry "NameEntry",  // `entry` on maps
/// } unmodeled { TAG xla_field_name, ... }                  // optional
/// ```
///
/// A map field names its entry message, which protobuf nests under the
/// map's message; its key and value come from the map's Rust type.
macro_rules! messages {
    ($(
        $(#[$meta:meta])*
        message $name:ident $(as $xla:literal)? {
            $(
                $(#[$field_meta:meta])*
                $tag:literal $field:ident: $ty:ty [$($kind:tt)*] $(entry $entry:literal)?
            ),* $(,)?
        } $(unmodeled { $($unmodeled_tag:literal $unmodeled:ident),* $(,)? })?
    )*) => {
        $(
            $(#[$meta])*
            #[derive(Clone, PartialEq, prost::Message)]
            pub struct $name {
                $(
                    $(#[$field_meta])*
                    #[prost($($kind)*, tag = $tag)]
                    pub $field: $ty,
                )*
            }

            impl $crate::formats::proto::schema::Modeled for $name {
                fn schema() -> &'static $crate::formats::proto::schema::Schema {
                    use $crate::formats::proto::schema::{proto_name, FieldSchema, Schema};
                    // For the fields' map entries, named under the message.
                    macro_rules! xla_name {
                        () => { messages!(@xla $name $($xla)?) };
                    }
                    static SCHEMA: Schema = Schema {
                        name: xla_name!(),
                        fields: &[$(FieldSchema {
                            number: $tag,
                            name: proto_name(stringify!($field)),
                            nested: messages!(@nested $ty $(; $entry)?),
                        }),*],
                        unmodeled: &[$($(($unmodeled_tag, stringify!($unmodeled))),*)?],
                    };
                    &SCHEMA
                }
            }

            impl $crate::formats::proto::schema::FieldType for $name {
                fn nested() -> Option<&'static $crate::formats::proto::schema::Schema> {
                    Some(<Self as $crate::formats::proto::schema::Modeled>::schema())
                }
            }
        )*

        /// Every message declared, for the table's own tests.
        // Public for the crate's tests (tests/it/proto_messages.rs).
        #[doc(hidden)]
        pub static DECLARED: &[fn() -> &'static $crate::formats::proto::schema::Schema] =
            &[$(<$name as $crate::formats::proto::schema::Modeled>::schema),*];
    };
    (@xla $name:ident) => { stringify!($name) };
    (@xla $name:ident $xla:literal) => { $xla };
    (@nested $ty:ty) => {
        <$ty as $crate::formats::proto::schema::FieldType>::nested
    };
    (@nested $ty:ty; $entry:literal) => {{
        use $crate::formats::proto::schema::{FieldSchema, FieldType, MapField, Schema};
        fn entry() -> Option<&'static Schema> {
            static ENTRY: Schema = Schema {
                name: concat!(xla_name!(), ".", $entry),
                fields: &[
                    FieldSchema {
                        number: 1,
                        name: "key",
                        nested: <<$ty as MapField>::Key as FieldType>::nested,
                    },
                    FieldSchema {
                        number: 2,
                        name: "value",
                        nested: <<$ty as MapField>::Value as FieldType>::nested,
                    },
                ],
                unmodeled: &[],
            };
            Some(&ENTRY)
        }
        entry
    }};
}

pub(crate) use messages;
