/*
 * What a UDP echo server's receive call costs a round trip when both ends share one CPU: the
 * gap behind `ping_udp_1k` at 1.03x sockperf with `bench/compare.py --pin same` (issue 42).
 *
 * Four echo servers on loopback, all pinned to the CPU this program runs on, each answering a
 * 1 KiB datagram with the same bytes:
 *   plain      one socket, recvfrom (sockperf's server)
 *   group      the same socket in a SO_REUSEPORT group with a second, idle socket and a
 *              steering program (SO_ATTACH_REUSEPORT_CBPF) that picks it (our server's lane
 *              and shared socket, one port)
 *   group+msg  as group, receiving with recvmsg (a msghdr with the sender's address, as a lane
 *              that must read GRO sizes, drop marks and destination addresses does)
 *   plain+msg  one socket, recvmsg
 *   group+conn as group, and each client, from its first datagram on, gets a socket of its own
 *              in the group, connected to it and read with recv (our server's round-trip
 *              sessions since session 20: `engine::udp::own_socket`)
 * A client on the same CPU (a connected socket, send then recv, as sockperf's) times 200,000
 * round trips against each in turn, for ROUNDS rounds, and prints each server's median p50
 * and its ratio to plain's.
 *
 * Measured on the 2-vCPU VM of issue 42 (kernel 6.18, 2026-11-30, 8 rounds): plain 10.86 us,
 * group 1.016x, group+msg 1.028x, plain+msg 1.018x (two earlier runs of the same servers:
 * group 1.005x and 1.011x, group+msg 1.015x and 1.030x). With group+conn (2026-12-01, 8
 * rounds): plain 10.83 us, group 1.012x, group+msg 1.021x, plain+msg 1.013x, group+conn
 * 0.981x: the kernel finds a connected socket by its addresses before it looks at the group.
 *
 * Loopback only; no root. Usage:
 *   cc -O2 -o /tmp/udp-receive-cost lab/udp-receive-cost.c && taskset -c 1 /tmp/udp-receive-cost [ROUNDS]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <linux/filter.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#ifndef SO_ATTACH_REUSEPORT_CBPF
#define SO_ATTACH_REUSEPORT_CBPF 51
#endif

enum { PLAIN, GROUP, GROUP_MSG, PLAIN_MSG, GROUP_CONN, MODES };
static const char *NAMES[MODES] = {"plain", "group", "group+msg", "plain+msg", "group+conn"};
enum { ROUND_TRIPS = 200000, SIZE = 1024 };

static int bound(struct sockaddr_in *at, int reuseport) {
    int s = socket(AF_INET, SOCK_DGRAM, 0), one = 1;
    if (s < 0) { perror("socket"); exit(1); }
    if (reuseport) setsockopt(s, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one);
    if (bind(s, (struct sockaddr *)at, sizeof *at)) { perror("bind"); exit(1); }
    return s;
}

/* Binds an echo server of `mode` to a free loopback port (written to `at`); never returns in
 * the child. */
static pid_t serve(int mode, struct sockaddr_in *at) {
    memset(at, 0, sizeof *at);
    at->sin_family = AF_INET;
    at->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int grouped = mode == GROUP || mode == GROUP_MSG || mode == GROUP_CONN;
    int s = bound(at, grouped);
    socklen_t len = sizeof *at;
    getsockname(s, (struct sockaddr *)at, &len);
    if (grouped) {
        struct sock_filter pick_first[] = {{BPF_RET | BPF_K, 0, 0, 0}};
        struct sock_fprog prog = {1, pick_first};
        if (setsockopt(s, SOL_SOCKET, SO_ATTACH_REUSEPORT_CBPF, &prog, sizeof prog)) {
            perror("SO_ATTACH_REUSEPORT_CBPF");
            exit(1);
        }
        bound(at, 1); /* the idle second member */
    }
    pid_t pid = fork();
    if (pid != 0) return pid;
    static char buf[65536];
    if (mode == GROUP_CONN) {
        /* Each new client (a new socket per round) arrives on s; it then gets a connected
         * socket of its own, read alone until the client goes quiet for a second. */
        for (;;) {
            struct sockaddr_in from;
            socklen_t fl = sizeof from;
            ssize_t n = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
            int c = bound(at, 1);
            if (connect(c, (struct sockaddr *)&from, fl)) { perror("connect"); exit(1); }
            struct timeval quiet = {1, 0};
            setsockopt(c, SOL_SOCKET, SO_RCVTIMEO, &quiet, sizeof quiet);
            sendto(s, buf, n, 0, (struct sockaddr *)&from, fl);
            for (;;) {
                n = recv(c, buf, sizeof buf, 0);
                if (n <= 0) break;
                send(c, buf, n, 0);
            }
            close(c);
        }
    }
    for (;;) {
        struct sockaddr_in from;
        socklen_t fl = sizeof from;
        ssize_t n;
        if (mode == GROUP_MSG || mode == PLAIN_MSG) {
            struct iovec iov = {buf, sizeof buf};
            struct msghdr m = {.msg_name = &from, .msg_namelen = sizeof from, .msg_iov = &iov, .msg_iovlen = 1};
            n = recvmsg(s, &m, 0);
            fl = m.msg_namelen;
        } else {
            n = recvfrom(s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
        }
        if (n > 0) sendto(s, buf, n, 0, (struct sockaddr *)&from, fl);
    }
}

static long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000L + t.tv_nsec;
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median round trip, in microseconds, of ROUND_TRIPS against the server at `at`. */
static double p50_us(struct sockaddr_in *at) {
    static double rtt[ROUND_TRIPS];
    char buf[SIZE] = {0};
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0 || connect(s, (struct sockaddr *)at, sizeof *at)) { perror("client"); exit(1); }
    for (int i = 0; i < 1000; i++) { send(s, buf, SIZE, 0); recv(s, buf, SIZE, 0); } /* warm-up */
    for (int i = 0; i < ROUND_TRIPS; i++) {
        long t = now_ns();
        send(s, buf, SIZE, 0);
        recv(s, buf, SIZE, 0);
        rtt[i] = (now_ns() - t) / 1000.0;
    }
    close(s);
    qsort(rtt, ROUND_TRIPS, sizeof rtt[0], by_value);
    return rtt[ROUND_TRIPS / 2];
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 8;
    if (rounds < 1 || rounds > 100) { fprintf(stderr, "ROUNDS must be 1 to 100\n"); return 2; }
    struct sockaddr_in at[MODES];
    pid_t pids[MODES];
    for (int m = 0; m < MODES; m++) pids[m] = serve(m, &at[m]);
    double p50[MODES][100], ratio[MODES][100];
    for (int r = 0; r < rounds; r++) {
        for (int m = 0; m < MODES; m++) p50[m][r] = p50_us(&at[m]);
        printf("round %d:", r);
        for (int m = 0; m < MODES; m++) {
            ratio[m][r] = p50[m][r] / p50[PLAIN][r];
            printf(" %s %.3f", NAMES[m], p50[m][r]);
        }
        printf("\n");
        fflush(stdout);
    }
    for (int m = 0; m < MODES; m++) {
        kill(pids[m], SIGKILL);
        waitpid(pids[m], NULL, 0);
        qsort(p50[m], rounds, sizeof(double), by_value);
        qsort(ratio[m], rounds, sizeof(double), by_value);
        printf("%-10s p50 median %.3f us, %.3fx plain\n", NAMES[m], p50[m][rounds / 2], ratio[m][rounds / 2]);
    }
    return 0;
}
