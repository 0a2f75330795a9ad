"""What the runner reported about the candidate's launches, weighed by what the judge measured: probe calls
on the CPU, profiled forwards on a GPU, and a static torch-compute finding decided by what ran."""
