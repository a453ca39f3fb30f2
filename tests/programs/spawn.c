/* MPI_Comm_spawn: the job's ranks start one more process (this program again) and rank 0 sends
 * it a number across the intercommunicator; the spawned process, whose MPI_COMM_WORLD is its
 * own, prints what it got. */
#include <mpi.h>
#include <stdio.h>

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    MPI_Comm parent, children;
    MPI_Comm_get_parent(&parent);
    int r;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    if (parent == MPI_COMM_NULL) {
        MPI_Comm_spawn(argv[0], MPI_ARGV_NULL, 1, MPI_INFO_NULL, 0, MPI_COMM_WORLD, &children,
                       MPI_ERRCODES_IGNORE);
        int x = 5;
        if (r == 0) MPI_Send(&x, 1, MPI_INT, 0, 1, children);
        MPI_Barrier(MPI_COMM_WORLD);
        printf("rank %d: done\n", r);
        MPI_Comm_free(&children);
    } else {
        int x = -1;
        MPI_Recv(&x, 1, MPI_INT, 0, 1, parent, MPI_STATUS_IGNORE);
        printf("spawned: got %d\n", x);
        MPI_Comm_free(&parent);
    }
    MPI_Finalize();
    return 0;
}
