//! Compression codecs for the records section of a batch (filled in by the codec work).
