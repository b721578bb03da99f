// SIGINT/SIGTERM handling for the trainer: the handler only records the request; the loop
// polls it between steps, saves a checkpoint and returns. A second signal exits at once.
#pragma once

namespace monoflow::train {

class Distributed;

void install_stop_handlers();  // idempotent
bool stop_requested();
int stop_signal();             // the signal that asked (0: none)
void clear_stop_request();     // tests, and a new run in the same process
void request_stop(int signal); // what the handler does; tests call it directly

// The signal that stopped the run, known on every rank (a rank that got none takes its
// peers'): the mean over the ranks that got one. Called by all ranks together.
int signal_of_any_rank(Distributed& dist);

}  // namespace monoflow::train
