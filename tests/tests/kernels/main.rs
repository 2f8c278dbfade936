//! The kernels family (`machines/src/kernels/`): each kernel machine obeys
//! its table (every state × every event kind, random sequences), its guards
//! reject with typed errors, and its prepare routes give the scalar
//! reference's results, identical for every lane budget. The shared driver
//! is `voxlane_tests::kernel_conformance`.

mod machine_conv1d;
mod machine_conv_transpose1d;
mod machine_kernel_attention;
mod machine_kernel_f32_matvec;
mod machine_kernel_matmul;
mod machine_lstm;
