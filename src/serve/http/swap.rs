//! A value the listener reads on every request and a reload replaces whole: the principals,
//! the limits. Readers take the current `Arc` (a read lock held for a clone) and keep using
//! it for the whole request, so a request never sees half of one set and half of another.
//! No new dependency: `arc-swap` would do the same with fewer atomics.

use std::sync::{Arc, RwLock};

pub(super) struct Swap<T>(RwLock<Arc<T>>);

impl<T> Swap<T> {
    pub(super) fn new(value: T) -> Swap<T> {
        Swap(RwLock::new(Arc::new(value)))
    }

    /// The value in force now.
    pub(super) fn load(&self) -> Arc<T> {
        self.0.read().unwrap_or_else(|p| p.into_inner()).clone()
    }

    /// Puts `value` in force for every request from now on; returns the one it replaced.
    pub(super) fn store(&self, value: T) -> Arc<T> {
        let mut current = self.0.write().unwrap_or_else(|p| p.into_inner());
        std::mem::replace(&mut *current, Arc::new(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_its_value_while_the_next_one_sees_the_new() {
        let s = Swap::new(1);
        let held = s.load();
        assert_eq!(*s.store(2), 1);
        assert_eq!((*held, *s.load()), (1, 2));
    }
}
