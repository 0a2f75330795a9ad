"""Whether a candidate's outputs are right: the correctness protocol, the comparison of one output with the
reference under the error budget (whole, sliced, or in one pass on a GPU), and the re-check of timed outputs."""
