//! The guest's allocator: an arena in the module's own zeroed data, so that a
//! call's allocations fit in the memory the instance starts with.
//!
//! The standard allocator on `wasm32` takes every heap block by growing linear
//! memory. A host may run each call in a fresh instance (the Python host does;
//! the Rust host keeps a clean instance warm), so every call grew its memory and
//! the host then had to change page protections twice per call (grow, then shrink
//! back for the slot's next user), with a TLB shootdown on every host thread:
//! about half of a small call's cost. Allocations now come from a fixed arena
//! (managed by `talc`); only what does not fit there grows memory, through the
//! standard allocator as before, so no call can run out where it did not.

use core::alloc::{GlobalAlloc, Layout};
use core::mem::MaybeUninit;
use std::alloc::System;

/// Enough for every ordinary call; larger ones (huge arguments, very long
/// lists) spill into grown memory.
const ARENA_BYTES: usize = 2 << 20;

static mut ARENA_MEMORY: [MaybeUninit<u8>; ARENA_BYTES] = [MaybeUninit::uninit(); ARENA_BYTES];

// SAFETY: the arena is handed to the allocator whole and touched by nothing
// else; the guest is single-threaded wasm.
static ARENA: talc::wasm::WasmArenaTalc =
    unsafe { talc::wasm::new_wasm_arena_allocator(&raw mut ARENA_MEMORY) };

/// The arena first, then the standard allocator.
pub(crate) struct GuestAllocator;

fn in_arena(ptr: *mut u8) -> bool {
    let start = (&raw const ARENA_MEMORY).cast::<u8>() as usize;
    (start..start + ARENA_BYTES).contains(&(ptr as usize))
}

// SAFETY: every block is freed, and resized, by the allocator that made it,
// told apart by its address.
unsafe impl GlobalAlloc for GuestAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, passed on.
        unsafe {
            let ptr = ARENA.alloc(layout);
            if ptr.is_null() {
                System.alloc(layout)
            } else {
                ptr
            }
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller's layout, passed on.
        unsafe {
            let ptr = ARENA.alloc_zeroed(layout);
            if ptr.is_null() {
                System.alloc_zeroed(layout)
            } else {
                ptr
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from the allocator its address names.
        unsafe {
            if in_arena(ptr) {
                ARENA.dealloc(ptr, layout);
            } else {
                System.dealloc(ptr, layout);
            }
        }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from the allocator its address names; a block
        // that outgrows the arena moves to the standard allocator.
        unsafe {
            if !in_arena(ptr) {
                return System.realloc(ptr, layout, new_size);
            }
            let grown = ARENA.realloc(ptr, layout, new_size);
            if !grown.is_null() {
                return grown;
            }
            let moved = System.alloc(Layout::from_size_align_unchecked(new_size, layout.align()));
            if !moved.is_null() {
                moved.copy_from_nonoverlapping(ptr, layout.size().min(new_size));
                ARENA.dealloc(ptr, layout);
            }
            moved
        }
    }
}
