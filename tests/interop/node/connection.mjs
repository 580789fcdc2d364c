// The Redis connection of bull.mjs and parity.mjs, from their first argument:
//
//   <port>                                  one redis-server on 127.0.0.1
//   redis+cluster://[[user]:pw@]h:p[,h:p]   a Redis Cluster (rediss+cluster:// for TLS)
//
// For one server `connection` is ioredis options, as before; for a cluster it
// is one ioredis Cluster that every BullMQ object of the process shares (BullMQ
// duplicates it where it needs a blocking connection). BullMQ wants
// maxRetriesPerRequest null on a worker's connection; on a Cluster that goes
// in redisOptions. `newClient()` is a plain client for raw commands.
import { Cluster, Redis } from 'ioredis';

const CLUSTER = /^(rediss?)\+cluster:\/\/(?:([^@]*)@)?([^/?#]+)\/?$/i;

function clusterOf(url) {
  const match = CLUSTER.exec(url);
  if (!match) throw new Error(`bad Redis Cluster URL ${url}`);
  const [, scheme, userinfo, hosts] = match;
  const nodes = hosts.split(',').map(item => {
    const at = item.lastIndexOf(':');
    const bracketed = item.startsWith('[');
    const host = at > 0 && (!bracketed || item[at - 1] === ']') ? item.slice(0, at) : item;
    const port = host === item ? 6379 : Number(item.slice(at + 1));
    return { host: host.replace(/^\[|\]$/g, ''), port };
  });
  const redisOptions = { maxRetriesPerRequest: null };
  if (userinfo) {
    const colon = userinfo.indexOf(':');
    const user = decodeURIComponent(colon < 0 ? userinfo : userinfo.slice(0, colon));
    if (user) redisOptions.username = user;
    if (colon >= 0) redisOptions.password = decodeURIComponent(userinfo.slice(colon + 1));
  }
  if (scheme.toLowerCase() === 'rediss') redisOptions.tls = {};
  return () => new Cluster(nodes, { redisOptions });
}

export function connect(target) {
  if (/^\d+$/.test(target)) {
    const connection = { host: '127.0.0.1', port: Number(target), maxRetriesPerRequest: null };
    return { connection, newClient: () => new Redis(connection) };
  }
  const newClient = clusterOf(target);
  return { connection: newClient(), newClient };
}
