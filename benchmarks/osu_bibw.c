/* SPDX-License-Identifier: BSD-3-Clause */
/* rig_osu_bibw: bandwidth both ways at once, rig against MPI and raw UCX. */
#include "patterns.h"

int main(int argc, char **argv)
{
    return bench_main_stream(argc, argv, true, false);
}
