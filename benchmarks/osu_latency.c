/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_osu_latency: half round trip of a ping-pong, rig against MPI and raw UCX.
 */
#include "patterns.h"

int main(int argc, char **argv)
{
    return bench_main_latency(argc, argv);
}
