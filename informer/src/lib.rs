//! # ferrokube-informer
//!
//! The informer machinery of ferrokube (client-go's `tools/cache`): a Reflector that lists and then watches
//! one resource type, a thread-safe Store with Indexers, Listers over it, and a SharedIndexInformer that fans
//! the resulting events out to any number of handlers.
//!
//! This crate is being built; today it holds no public items. The workspace already depends on it so that
//! `ferrokube::informer` is the one path to these types once they land.
