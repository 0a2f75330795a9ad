"""The reference's side of an evaluation: its correctness rounds (inputs, native and float64 outputs), made
ahead and kept between candidates; its compiled form, its own runner for timing, and the work it counts."""
