//! f32 matvec: placeholder until the kernel lands.
