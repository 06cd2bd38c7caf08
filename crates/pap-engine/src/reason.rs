//! Typed errors for the engine's small checks (a duration, an address, a password hash, an
//! ATP response, a timestamp, a program's path) where what the caller needs is the reason in
//! words: each is its own type, so a signature says which check failed and a caller cannot
//! pass one for another, and its `Display` is the reason, unchanged.

/// A type for one check's failure, carrying its reason.
macro_rules! reason_error {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq)]
        pub struct $name(String);

        impl $name {
            /// The reason, in words.
            pub fn reason(&self) -> &str {
                &self.0
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::error::Error for $name {}

        impl From<String> for $name {
            fn from(reason: String) -> $name {
                $name(reason)
            }
        }

        impl From<&str> for $name {
            fn from(reason: &str) -> $name {
                $name(reason.to_owned())
            }
        }
    };
}

pub(crate) use reason_error;
