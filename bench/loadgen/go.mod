module gangsched.local/bench/loadgen

go 1.26
