//! The `pap` binary's allocator: mimalloc, except for the blocks that hold the state file's
//! cached pages, which go to the C library's malloc.
//!
//! mimalloc is several times faster than glibc's malloc for events parsed on one thread and
//! freed on another (see the dispatch benchmark). But it rounds each block up to a size class,
//! the classes about a quarter apart at this size, and redb keeps each cached page in an
//! `Arc<[u8]>`: 4 KiB (or 4 KiB × 2^k) and the Arc's two counters. 4,112 bytes fall just past
//! the 4,096 class and take 5,120, so redb's 256 MiB page cache (`store_cache`) took 320 MiB,
//! and the cache's bound was not the memory's. The C library's malloc wastes 8 bytes a block.
//!
//! Routing by size alone is sound: `dealloc` and `realloc` get the layout the block was
//! allocated with, so a block always goes back to the allocator it came from. Any other block
//! of exactly such a size goes to the C library too, which is only slower.
//!
//! mimalloc is also tuned (see [`tune`]): no transparent huge pages (the `no_thp` feature in
//! Cargo.toml) and a shorter purge delay.

use std::alloc::{GlobalAlloc, Layout, System};

use mimalloc::MiMalloc;

pub struct Allocator;

/// mimalloc's option `purge_delay` (its index in `mi_option_t` of mimalloc 3, the crate's).
const MI_OPTION_PURGE_DELAY: c_int = 15;
/// How long (ms) mimalloc keeps freed memory before returning it to the OS. Its default, a
/// second, let a dispatch's peak hold about 18 MB more (100,000 events with a 1 MiB `store_cache`:
/// 71 MB against 53 MB at 1 to 5 ms): groups of events are freed on one thread while the
/// next is parsed on another, and pages were not returned in time to be reused. The cost is
/// a few more `madvise` calls.
const PURGE_DELAY_MS: c_long = 5;

use std::ffi::{c_int, c_long};

unsafe extern "C" {
    // mimalloc's C API, linked in by the `mimalloc` crate.
    fn mi_option_set(option: c_int, value: c_long);
    #[cfg(test)]
    fn mi_option_get(option: c_int) -> c_long;
}

/// Sets mimalloc's options, first thing in `main`; `MIMALLOC_PURGE_DELAY` in the environment
/// still wins.
pub fn tune() {
    if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
        // SAFETY: sets one of mimalloc's options, which it reads atomically when it purges.
        unsafe { mi_option_set(MI_OPTION_PURGE_DELAY, PURGE_DELAY_MS) }
    }
}

/// An `Arc`'s strong and weak counters, before its data.
const ARC_HEADER: usize = 2 * std::mem::size_of::<usize>();
/// redb's page size; larger pages are this times a power of two.
const PAGE: usize = 4096;
/// The largest page whose blocks are routed (redb's pages of order 15 and below).
const LARGEST_PAGE: usize = PAGE << 15;

/// Whether a block of `layout` is the size of a cached page in its `Arc`.
fn is_page(layout: Layout) -> bool {
    let data = layout.size().wrapping_sub(ARC_HEADER);
    (PAGE..=LARGEST_PAGE).contains(&data) && data.is_power_of_two() && layout.align() <= ARC_HEADER
}

// SAFETY: every call goes to one of two sound allocators, chosen by the layout's size alone, so
// a block is always freed (or resized) by the allocator that allocated it; a resize that
// crosses from one to the other allocates in the new one, copies, and frees in the old one.
unsafe impl GlobalAlloc for Allocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's contract (a non-zero size) is passed on unchanged.
        unsafe {
            if is_page(layout) {
                System.alloc(layout)
            } else {
                MiMalloc.alloc(layout)
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as `alloc`.
        unsafe {
            if is_page(layout) {
                System.alloc_zeroed(layout)
            } else {
                MiMalloc.alloc_zeroed(layout)
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` was allocated with `layout`, so by the allocator `is_page` chose then.
        unsafe {
            if is_page(layout) {
                System.dealloc(ptr, layout)
            } else {
                MiMalloc.dealloc(ptr, layout)
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: the caller guarantees `new_size` with `layout.align()` is a valid layout.
        let new = unsafe { Layout::from_size_align_unchecked(new_size, layout.align()) };
        // SAFETY: `ptr` was allocated with `layout` by the allocator `is_page(layout)` names;
        // when the new size belongs to the other one, the block moves (as `realloc` may).
        unsafe {
            match (is_page(layout), is_page(new)) {
                (false, false) => MiMalloc.realloc(ptr, layout, new_size),
                (true, true) => System.realloc(ptr, layout, new_size),
                _ => {
                    let moved = self.alloc(new);
                    if !moved.is_null() {
                        std::ptr::copy_nonoverlapping(ptr, moved, layout.size().min(new_size));
                        self.dealloc(ptr, layout);
                    }
                    moved
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_purge_delay_is_the_option_tuned() {
        // Its default in mimalloc 3 is 1,000 ms: the index names the option meant.
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: reads one of mimalloc's options.
            assert_eq!(unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) }, 1000);
        }
        tune();
        if std::env::var_os("MIMALLOC_PURGE_DELAY").is_none() {
            // SAFETY: as above.
            assert_eq!(
                unsafe { mi_option_get(MI_OPTION_PURGE_DELAY) },
                PURGE_DELAY_MS
            );
        }
    }

    #[test]
    fn only_page_sized_arcs_are_routed() {
        let page = |data: usize| Layout::from_size_align(data + ARC_HEADER, 8).unwrap();
        assert!(is_page(page(4096)));
        assert!(is_page(page(8192)));
        assert!(is_page(page(LARGEST_PAGE)));
        assert!(!is_page(page(4000)));
        assert!(!is_page(page(LARGEST_PAGE * 2)));
        assert!(!is_page(Layout::from_size_align(4096, 8).unwrap()));
        assert!(!is_page(Layout::from_size_align(4112, 64).unwrap()));
        assert!(!is_page(Layout::from_size_align(8, 8).unwrap()));
    }

    #[test]
    fn a_block_resized_across_the_line_keeps_its_bytes() {
        let a = Allocator;
        let small = Layout::from_size_align(100, 8).unwrap();
        // SAFETY: each block is used within its layout and freed with it.
        unsafe {
            let p = a.alloc(small);
            assert!(!p.is_null());
            for i in 0..100 {
                *p.add(i) = i as u8;
            }
            let p = a.realloc(p, small, 4096 + ARC_HEADER);
            assert!(!p.is_null());
            assert!((0..100).all(|i| *p.add(i) == i as u8));
            let page = Layout::from_size_align(4096 + ARC_HEADER, 8).unwrap();
            let p = a.realloc(p, page, 50);
            assert!((0..50).all(|i| *p.add(i) == i as u8));
            a.dealloc(p, Layout::from_size_align(50, 8).unwrap());
        }
    }
}
