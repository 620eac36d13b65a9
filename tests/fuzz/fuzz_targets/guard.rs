//! The guard alone, with its promise checked: if `check_request` accepts a frame, decoding it with
//! kafka-protocol (header + body, from `Bytes`, as the broker does) must not allocate more than
//! `64 * len + 64 KiB` at peak. A counting global allocator measures it.
#![no_main]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicBool, AtomicIsize, Ordering::Relaxed};

use kafka_protocol::messages::{ApiKey, RequestHeader, RequestKind};
use kafka_protocol::protocol::Decodable;
use libfuzzer_sys::fuzz_target;

struct Counting;
static ON: AtomicBool = AtomicBool::new(false);
static LIVE: AtomicIsize = AtomicIsize::new(0);
static PEAK: AtomicIsize = AtomicIsize::new(0);

fn track(delta: isize) {
    if ON.load(Relaxed) {
        let live = LIVE.fetch_add(delta, Relaxed) + delta;
        PEAK.fetch_max(live, Relaxed);
    }
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        track(l.size() as isize);
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        track(l.size() as isize);
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        track(-(l.size() as isize));
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        track(new as isize - l.size() as isize);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fuzz_target!(|data: &[u8]| {
    if ketch::protocol::guard::check_request(data).is_err() {
        return;
    }
    let key = ApiKey::try_from(i16::from_be_bytes([data[0], data[1]])).expect("guard accepted an unknown key");
    let version = i16::from_be_bytes([data[2], data[3]]);
    let mut buf = bytes::Bytes::copy_from_slice(data);
    LIVE.store(0, Relaxed);
    PEAK.store(0, Relaxed);
    ON.store(true, Relaxed);
    let decoded = RequestHeader::decode(&mut buf, key.request_header_version(version))
        .and_then(|_| RequestKind::decode(key, &mut buf, version));
    drop(decoded);
    drop(buf);
    ON.store(false, Relaxed);
    let peak = PEAK.load(Relaxed).max(0) as usize;
    assert!(peak <= 64 * data.len() + 64 * 1024, "decode peaked at {peak} bytes for a {}-byte frame", data.len());
});
