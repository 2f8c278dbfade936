//! Shared helpers for voxlane's integration tests.
