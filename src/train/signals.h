// SIGINT/SIGTERM handling for the trainer: the handler only records the request; the loop
// polls it between steps, saves a checkpoint and returns. A second signal exits at once.
#pragma once

namespace monoflow::train {

void install_stop_handlers();  // idempotent
bool stop_requested();
int stop_signal();             // the signal that asked (0: none)
void clear_stop_request();     // tests, and a new run in the same process
void request_stop(int signal); // what the handler does; tests call it directly

}  // namespace monoflow::train
