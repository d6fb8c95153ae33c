//! Declarative helpers that define wire types once and derive both encodings.
//!
//! * [`wire_struct!`] — a plain serde struct plus its [`Validate`](crate::Validate)
//!   implementation (finite-number checks naming the field path).
//! * [`wire_enum!`] — an enum whose variants each wrap one struct. In JSON it is
//!   internally tagged (`{"type": "snake_name", ...fields}`); in the binary
//!   encoding it is bincode's externally tagged form (variant index as a varint,
//!   then the payload). The switch uses `Serializer::is_human_readable`. Also
//!   generates a fieldless `…Kind` enum with the same stable names.
//!
//! Either macro takes a leading `#[openapi]` marker: with the `openapi` feature the type then
//! implements `utoipa::ToSchema` with its JSON form (for an enum: one of its variants' schemas
//! with the `"type"` tag), for steerd's `/openapi.json`. Only the types its REST API carries
//! are marked.

macro_rules! wire_struct {
    (
        #[openapi]
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$($fattr:tt)*])* pub $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        wire_struct! {
            $(#[$meta])*
            #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
            pub struct $name {
                $( $(#[$($fattr)*])* pub $field: $ty ),*
            }
        }
    };
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $( $(#[$($fattr:tt)*])* pub $field:ident : $ty:ty ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
        pub struct $name {
            $( $(#[$($fattr)*])* pub $field: $ty ),*
        }

        impl $crate::schema::Describe for $name {
            fn describe() -> $crate::schema::Type {
                $crate::schema::Type::Struct {
                    fields: vec![ $( (stringify!($field), field_type!($([$($fattr)*])* ; $ty)) ),* ],
                }
            }
        }

        impl $crate::validate::Validate for $name {
            #[allow(unused_variables)]
            fn validate_at(
                &self,
                path: &mut $crate::validate::FieldPath,
            ) -> Result<(), $crate::validate::FieldError> {
                $( path.field(stringify!($field), |p| self.$field.validate_at(p))?; )*
                Ok(())
            }
        }
    };
}

/// A field's schema type: `packed` for a field serialized `with` a `crate::pack` coding, else
/// its Rust type's description (other attributes are skipped).
macro_rules! field_type {
    ([serde(with = $with:literal)] $($rest:tt)*) => {
        $crate::schema::packed($with)
    };
    ([$($other:tt)*] $($rest:tt)*) => {
        field_type!($($rest)*)
    };
    (; $ty:ty) => {
        <$ty as $crate::schema::Describe>::describe()
    };
}

macro_rules! wire_enum {
    (
        #[openapi]
        $(#[doc = $doc:literal])*
        pub enum $name:ident / $kind:ident {
            // `tt`, not `literal`: a `literal` fragment reaches utoipa's derive wrapped in an
            // invisible group, which its `serde(rename = …)` parser does not see through.
            $( $(#[doc = $vdoc:literal])* $var:ident($ty:ty) = $tag:tt ),+ $(,)?
        }
    ) => {
        wire_enum! {
            $(#[doc = $doc])*
            pub enum $name / $kind {
                $( $(#[doc = $vdoc])* $var($ty) = $tag ),+
            }
        }

        // The JSON form (internally tagged by `"type"`) described by utoipa's derive on a
        // mirror enum that exists only for its schema.
        #[cfg(feature = "openapi")]
        const _: () = {
            $(#[doc = $doc])*
            #[derive(utoipa::ToSchema)]
            #[serde(tag = "type")]
            #[allow(dead_code)]
            enum Schema { $( $(#[doc = $vdoc])* #[serde(rename = $tag)] $var($ty) ),+ }

            impl utoipa::PartialSchema for $name {
                fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                    <Schema as utoipa::PartialSchema>::schema()
                }
            }

            impl utoipa::ToSchema for $name {
                fn name() -> std::borrow::Cow<'static, str> {
                    std::borrow::Cow::Borrowed(stringify!($name))
                }

                fn schemas(schemas: &mut Vec<(String, utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>)>) {
                    <Schema as utoipa::ToSchema>::schemas(schemas)
                }
            }
        };
    };
    (
        $(#[$meta:meta])*
        pub enum $name:ident / $kind:ident {
            $( $(#[$vmeta:meta])* $var:ident($ty:ty) = $tag:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub enum $name {
            $( $(#[$vmeta])* $var($ty) ),+
        }

        #[doc = concat!("The variant names of [`", stringify!($name), "`], with their stable wire names.")]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        pub enum $kind {
            $( #[doc = concat!("`\"", $tag, "\"`")] #[serde(rename = $tag)] $var ),+
        }

        impl $kind {
            /// Every kind, in wire (variant index) order.
            pub const ALL: &'static [$kind] = &[ $( $kind::$var ),+ ];

            /// The stable wire name (`"type"` value in JSON).
            pub fn name(self) -> &'static str {
                match self { $( $kind::$var => $tag ),+ }
            }
        }

        impl $name {
            /// Which variant this is.
            pub fn kind(&self) -> $kind {
                match self { $( $name::$var(_) => $kind::$var ),+ }
            }
        }

        impl $crate::schema::Describe for $name {
            fn describe() -> $crate::schema::Type {
                $crate::schema::Type::Tagged {
                    tagged: vec![ $( ($tag, $crate::schema::fields_of(<$ty as $crate::schema::Describe>::describe())) ),+ ],
                }
            }
        }

        impl $crate::schema::Describe for $kind {
            fn describe() -> $crate::schema::Type {
                $crate::schema::Type::Names { names: $kind::ALL.iter().map(|k| k.name()).collect() }
            }
        }

        impl $crate::validate::Validate for $name {
            fn validate_at(
                &self,
                path: &mut $crate::validate::FieldPath,
            ) -> Result<(), $crate::validate::FieldError> {
                match self { $( $name::$var(v) => v.validate_at(path) ),+ }
            }
        }

        const _: () = {
            use serde::{Deserialize, Deserializer, Serialize, Serializer};

            #[derive(Serialize)]
            #[serde(tag = "type")]
            enum TaggedRef<'a> { $( #[serde(rename = $tag)] $var(&'a $ty) ),+ }

            #[derive(Serialize)]
            enum PlainRef<'a> { $( #[serde(rename = $tag)] $var(&'a $ty) ),+ }

            #[derive(Deserialize)]
            #[serde(tag = "type")]
            enum TaggedOwned { $( #[serde(rename = $tag)] $var($ty) ),+ }

            #[derive(Deserialize)]
            enum PlainOwned { $( #[serde(rename = $tag)] $var($ty) ),+ }

            impl Serialize for $name {
                fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    if s.is_human_readable() {
                        match self { $( $name::$var(v) => TaggedRef::$var(v) ),+ }.serialize(s)
                    } else {
                        match self { $( $name::$var(v) => PlainRef::$var(v) ),+ }.serialize(s)
                    }
                }
            }

            impl<'de> Deserialize<'de> for $name {
                fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                    if d.is_human_readable() {
                        Ok(match TaggedOwned::deserialize(d)? { $( TaggedOwned::$var(v) => $name::$var(v) ),+ })
                    } else {
                        Ok(match PlainOwned::deserialize(d)? { $( PlainOwned::$var(v) => $name::$var(v) ),+ })
                    }
                }
            }
        };
    };
}
