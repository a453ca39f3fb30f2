/* MPI_Comm_spawn: the job's ranks start one more process (this program again) and rank 0 sends
 * it a number across the intercommunicator; the spawned process, whose MPI_COMM_WORLD is its
 * own, prints what it got and sends it back.
 * MPI_Comm_spawn returns on one side before the other side's UCX endpoints are attached (in
 * the parents' MPI_Comm_spawn and the child's MPI_Init), and MPICH's MPI_Comm_free does not
 * wait for the other side: a process that exited first made the other's attach fail (UCX:
 * "open(/proc/PID/fd/N) failed", then an abort; mpiexec could still exit 0, the child's line
 * missing). So no process exits before all are attached: the child gets its number only after
 * every parent has returned from MPI_Comm_spawn (the first barrier), and the parents wait for
 * its reply, sent after its MPI_Init (the second). */
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
        int x = 5, back = -1;
        MPI_Barrier(MPI_COMM_WORLD);
        if (r == 0) {
            MPI_Send(&x, 1, MPI_INT, 0, 1, children);
            MPI_Recv(&back, 1, MPI_INT, 0, 2, children, MPI_STATUS_IGNORE);
        }
        MPI_Barrier(MPI_COMM_WORLD);
        printf("rank %d: done\n", r);
        MPI_Comm_free(&children);
    } else {
        int x = -1;
        MPI_Recv(&x, 1, MPI_INT, 0, 1, parent, MPI_STATUS_IGNORE);
        printf("spawned: got %d\n", x);
        MPI_Send(&x, 1, MPI_INT, 0, 2, parent);
        MPI_Comm_free(&parent);
    }
    MPI_Finalize();
    return 0;
}
