/*
 * The mock cloud's network rules, enforced on a mock node (tests/mocks/node/README.md,
 * "Network rules"). Every process of the node loads this library: node-up binds the
 * node's own ld.so.preload over /etc/ld.so.preload in the node's mount namespace, so
 * sshd, every ssh session and every container process (the docker stand-ins run them
 * in that namespace) has it, whatever its environment.
 *
 * The nodes are sshd processes on loopback addresses of one host: the kernel would let
 * any of them reach any other. A cloud filters where a packet arrives (a security
 * group, a firewall rule, a network security group); here the check runs where the
 * connection starts, in connect(): towards a governed node's address (a `node` line of
 * the policy) the call goes through only when an `allow` line of that node admits this
 * node's address, the protocol and the port. Otherwise it fails with ETIMEDOUT, the
 * error a connect whose SYN the cloud dropped ends with (at once, not after the
 * kernel's two minutes), and a line goes to /run/mock-node/denied.
 *
 * /run/mock-node is the node's folder DIR/net (bound there by node-up): `self` holds
 * the node's address, `policy` links to the mock cloud's STATE_DIR/net-policy, which the
 * mock rewrites (atomically) whenever an instance or a rule changes
 * (tests/mocks/mockcloud_lib/netpolicy.py, which documents the format). No policy, no
 * `self`: nothing is filtered.
 *
 * Limits (a mock, not a firewall): only connect() is checked (TCP, and UDP sockets that
 * connect; not sendto() without connect, not raw sockets), only dynamically linked
 * programs load it, and root on the node could unmount it. The nodes of the tests run
 * python, bash, ssh and the docker stand-ins, which all connect through libc.
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define NET_DIR "/run/mock-node"

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

static int read_self(struct in_addr *self)
{
	char buf[64] = "";
	FILE *f = fopen(NET_DIR "/self", "re");
	if (!f)
		return -1;
	if (!fgets(buf, sizeof(buf), f)) {
		fclose(f);
		return -1;
	}
	fclose(f);
	buf[strcspn(buf, " \t\r\n")] = '\0';
	return inet_pton(AF_INET, buf, self) == 1 ? 0 : -1;
}

static int in_cidr(struct in_addr a, const char *cidr)
{
	char net[64];
	int bits = 32;
	struct in_addr n;
	const char *slash = strchr(cidr, '/');
	size_t l = slash ? (size_t)(slash - cidr) : strlen(cidr);
	if (l >= sizeof(net))
		return 0;
	memcpy(net, cidr, l);
	net[l] = '\0';
	if (slash && (sscanf(slash + 1, "%d", &bits) != 1 || bits < 0 || bits > 32))
		return 0;
	if (inet_pton(AF_INET, net, &n) != 1)
		return 0;
	uint32_t mask = bits == 0 ? 0 : 0xffffffffu << (32 - bits);
	return (ntohl(a.s_addr) & mask) == (ntohl(n.s_addr) & mask);
}

/* 1 when the policy lets self reach dst:port over proto. */
static int allowed(struct in_addr self, struct in_addr dst, const char *proto, int port)
{
	char line[256];
	int governed = 0, ok = 0;
	FILE *f = fopen(NET_DIR "/policy", "re");
	if (!f)
		return 1;
	while (fgets(line, sizeof(line), f)) {
		char ip[64], pr[16], cidr[64];
		int lo, hi;
		struct in_addr a;
		if (sscanf(line, "node %63s", ip) == 1) {
			if (inet_pton(AF_INET, ip, &a) == 1 && a.s_addr == dst.s_addr)
				governed = 1;
		} else if (sscanf(line, "allow %63s %15s %d %d %63s", ip, pr, &lo, &hi, cidr) ==
		           5) {
			if (inet_pton(AF_INET, ip, &a) != 1 || a.s_addr != dst.s_addr)
				continue;
			if (strcmp(pr, "all") != 0 && strcmp(pr, proto) != 0)
				continue;
			if (port < lo || port > hi)
				continue;
			if (in_cidr(self, cidr))
				ok = 1;
		}
	}
	fclose(f);
	return !governed || ok;
}

static void note_denied(struct in_addr self, struct in_addr dst, const char *proto, int port)
{
	char s[INET_ADDRSTRLEN], d[INET_ADDRSTRLEN];
	FILE *f = fopen(NET_DIR "/denied", "ae");
	if (!f)
		return;
	inet_ntop(AF_INET, &self, s, sizeof(s));
	inet_ntop(AF_INET, &dst, d, sizeof(d));
	fprintf(f, "%s %s -> %s:%d denied (pid %ld)\n", proto, s, d, port, (long)getpid());
	fclose(f);
}

int connect(int fd, const struct sockaddr *sa, socklen_t len)
{
	static connect_fn real;
	struct in_addr dst, self;
	int port = -1, saved = errno;

	if (!real)
		real = (connect_fn)dlsym(RTLD_NEXT, "connect");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	if (sa && sa->sa_family == AF_INET && len >= (socklen_t)sizeof(struct sockaddr_in)) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)(const void *)sa;
		dst = in->sin_addr;
		port = ntohs(in->sin_port);
	} else if (sa && sa->sa_family == AF_INET6 &&
	           len >= (socklen_t)sizeof(struct sockaddr_in6)) {
		/* An IPv4 address in IPv6 clothes (::ffff:a.b.c.d) is the same destination. */
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)(const void *)sa;
		if (IN6_IS_ADDR_V4MAPPED(&in6->sin6_addr)) {
			memcpy(&dst.s_addr, in6->sin6_addr.s6_addr + 12, 4);
			port = ntohs(in6->sin6_port);
		}
	}
	if (port >= 0 && read_self(&self) == 0 && dst.s_addr != self.s_addr) {
		int type = 0;
		socklen_t tl = sizeof(type);
		const char *proto = NULL;
		if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0)
			proto = type == SOCK_STREAM ? "tcp" : type == SOCK_DGRAM ? "udp" : NULL;
		if (proto && !allowed(self, dst, proto, port)) {
			note_denied(self, dst, proto, port);
			errno = ETIMEDOUT;
			return -1;
		}
	}
	errno = saved;
	return real(fd, sa, len);
}
