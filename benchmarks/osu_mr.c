/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_osu_mr: transfers per second in runs of a window, rig against MPI and raw
 * UCX. */
#include "patterns.h"

int main(int argc, char **argv)
{
    return bench_main_stream(argc, argv, false, true);
}
