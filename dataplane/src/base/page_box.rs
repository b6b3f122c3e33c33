//! A future boxed in whole pages of its own, outside the allocator's heap: the request path's state
//! for one busy period of a connection (`http1::exchanges`, about 6.5 KB).
//!
//! Why not a `Box`: an idle connection drops that state, but the connection's long-lived
//! allocations (its task, socket, `ConnFacts`) were made between the boxes and buffers of busy
//! periods. In glibc's heap the freed 6.5 KB leave holes, and each connection's small live
//! allocations keep one or two pages resident that `malloc_trim` cannot give back: 9.6 KiB of RSS
//! per idle connection for 2.7 KB of live heap. Outside the heap the holes are whole pages of their
//! own and the heap stays dense (1.9 KiB per idle connection with the rest of this crate's savings, `docs/benchmarks.md`).
//!
//! A worker keeps the blocks it freed for the next busy period (no system call per connection in
//! steady state, and no `munmap`, whose TLB shootdown would interrupt the other workers' cores), and
//! unmaps those that a whole trim period left unused, as the buffer pools free their buffers.
//! A future larger than [`MAX_BLOCK`], or a failed `mmap`, falls back to a plain `Box`.

// The one module of the data plane that maps memory and places a future in it by hand.
#![allow(unsafe_code)]

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll};

/// The largest block: four pages of 4 KiB.
pub(crate) const MAX_BLOCK: usize = 16 * 1024;

/// A worker's free blocks, by size in pages. Worker-local: no lock, no sharing.
pub(crate) struct PagePool {
    page: usize,
    /// Free blocks of `i + 1` pages.
    free: RefCell<Vec<Vec<NonNull<u8>>>>,
    /// The fewest free blocks of each size since the last trim: that many were not needed.
    low: RefCell<Vec<usize>>,
    /// Blocks mapped now, free or in use.
    mapped: Cell<usize>,
}

impl PagePool {
    pub fn new() -> Self {
        // SAFETY: sysconf has no preconditions.
        let page = usize::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096).max(1);
        let sizes = MAX_BLOCK.div_ceil(page).max(1);
        PagePool {
            page,
            free: RefCell::new(vec![Vec::new(); sizes]),
            low: RefCell::new(vec![0; sizes]),
            mapped: Cell::new(0),
        }
    }

    /// Boxes `future` in a block of this pool (or on the heap, see the module doc).
    pub fn pin<F: Future>(&self, future: F) -> PageBox<'_, F> {
        let size = std::mem::size_of::<F>();
        if size == 0 || size > MAX_BLOCK || std::mem::align_of::<F>() > self.page {
            return PageBox::Heap(Box::pin(future));
        }
        let pages = size.div_ceil(self.page);
        let Some(block) = self.take(pages) else {
            return PageBox::Heap(Box::pin(future));
        };
        let ptr = block.cast::<F>();
        // SAFETY: the block is at least `size` bytes, page-aligned (so aligned for `F`), and ours
        // alone until `give`; the future is written once and never moved until it is dropped there.
        unsafe { ptr.as_ptr().write(future) };
        PageBox::Pages { ptr, pages, pool: self }
    }

    fn take(&self, pages: usize) -> Option<NonNull<u8>> {
        let mut free = self.free.borrow_mut();
        let list = &mut free[pages - 1];
        if let Some(block) = list.pop() {
            let mut low = self.low.borrow_mut();
            low[pages - 1] = low[pages - 1].min(list.len());
            return Some(block);
        }
        self.low.borrow_mut()[pages - 1] = 0;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing.
        let mapped = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                pages * self.page,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            return None;
        }
        self.mapped.set(self.mapped.get() + 1);
        NonNull::new(mapped.cast())
    }

    fn give(&self, block: NonNull<u8>, pages: usize) {
        self.free.borrow_mut()[pages - 1].push(block);
    }

    /// Unmaps the free blocks that stayed unused since the last call; returns how many.
    pub fn trim(&self) -> usize {
        let mut free = self.free.borrow_mut();
        let mut low = self.low.borrow_mut();
        let mut unmapped = 0;
        for (i, list) in free.iter_mut().enumerate() {
            let unused = low[i].min(list.len());
            for block in list.drain(..unused) {
                self.unmap(block, i + 1);
            }
            if list.is_empty() {
                *list = Vec::new();
            }
            low[i] = list.len();
            unmapped += unused;
        }
        unmapped
    }

    fn unmap(&self, block: NonNull<u8>, pages: usize) {
        // SAFETY: `block` is a mapping of `pages` pages made by `take` and no longer in use.
        unsafe { libc::munmap(block.as_ptr().cast(), pages * self.page) };
        self.mapped.set(self.mapped.get() - 1);
    }

    /// Blocks mapped now, free or in use.
    #[cfg(test)]
    pub fn mapped(&self) -> usize {
        self.mapped.get()
    }
}

impl Drop for PagePool {
    fn drop(&mut self) {
        let free = std::mem::take(self.free.get_mut());
        for (i, list) in free.into_iter().enumerate() {
            for block in list {
                self.unmap(block, i + 1);
            }
        }
    }
}

/// A pinned future in a block of a [`PagePool`] (or on the heap). Dropping it drops the future and
/// gives the block back to the pool.
pub(crate) enum PageBox<'p, F: Future> {
    Pages { ptr: NonNull<F>, pages: usize, pool: &'p PagePool },
    Heap(Pin<Box<F>>),
}

impl<F: Future> Future for PageBox<'_, F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        match self.get_mut() {
            // SAFETY: the future lives in its block, in place, until `drop`: it is pinned there.
            PageBox::Pages { ptr, .. } => unsafe { Pin::new_unchecked(ptr.as_mut()) }.poll(cx),
            PageBox::Heap(future) => future.as_mut().poll(cx),
        }
    }
}

impl<F: Future> Drop for PageBox<'_, F> {
    fn drop(&mut self) {
        if let PageBox::Pages { ptr, pages, pool } = self {
            // SAFETY: the future was written by `PagePool::pin` and is dropped once, here; the
            // block is not touched afterwards.
            unsafe { std::ptr::drop_in_place(ptr.as_ptr()) };
            pool.give(ptr.cast(), *pages);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use super::PagePool;

    #[test]
    fn blocks_are_reused_and_unmapped_after_a_whole_unused_period() {
        let pool = PagePool::new();
        let dropped = Rc::new(std::cell::Cell::new(0));
        let future = |n: u64| {
            let guard = Guard(dropped.clone());
            let state = [n; 700]; // 5.6 KB: two pages
            async move {
                let _guard = &guard;
                state.iter().sum::<u64>()
            }
        };
        let outputs: Vec<u64> = (0..4).map(|n| monoio_block_on(pool.pin(future(n)))).collect();
        assert_eq!(outputs, [0, 700, 1400, 2100]);
        assert_eq!(dropped.get(), 4, "each future was dropped once");
        assert_eq!(pool.mapped(), 1, "one at a time: one block, reused");
        let held: Vec<_> = (0..3).map(|n| pool.pin(future(n))).collect();
        assert_eq!(pool.mapped(), 3);
        drop(held);
        assert_eq!(dropped.get(), 7, "a future never polled is dropped too");
        assert_eq!(pool.trim(), 0, "this period needed all three");
        assert_eq!(pool.trim(), 3, "the next one needed none");
        assert_eq!(pool.mapped(), 0);
        let big = [0u8; 20_000];
        assert!(matches!(pool.pin(async move { big[0] }), super::PageBox::Heap(_)), "too large for a block");
    }

    struct Guard(Rc<std::cell::Cell<usize>>);

    impl Drop for Guard {
        fn drop(&mut self) {
            self.0.set(self.0.get() + 1);
        }
    }

    fn monoio_block_on<F: std::future::Future>(future: F) -> F::Output {
        monoio::RuntimeBuilder::<monoio::LegacyDriver>::new().build().unwrap().block_on(future)
    }
}
