//! Any bytes given to the drill parser and validator end in a drill or a located diagnostic, never a panic.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Err(e) = hybrid_drill::drill::from_source(std::path::Path::new("fuzz.yaml"), text.to_string()) {
        // Rendering walks the spans into the source: it must stay in bounds whatever the input.
        let _ = e.render();
    }
});
