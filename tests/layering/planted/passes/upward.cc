// Not compiled: the layering check's fixture. A pass that includes the command line and
// the pictures (both above passes/) and the simulator (below it, allowed).
#include "simulator/simulator.h"
#include "tools/command.h"
#include "viz/sim_svg.h"
