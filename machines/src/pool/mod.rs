//! The pool family: the lane pool's own machine.
//!
//! Every compute fork in voxlane runs on one [`voxlane_runtime::LanePool`]
//! with a strict thread budget; [`lane_dispatch`] is its dispatcher as a
//! machine (`voxlane info` starts the pool through it).

pub mod lane_dispatch;
