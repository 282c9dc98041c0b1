// A TCP proxy on loopback between the client and the server, for the failures a real network has: connections cut
// in the middle of a stream, a server out of reach for a while, a response lost after the server acted.

import { type AddressInfo, type Server, type Socket, createConnection, createServer } from 'node:net';

export class Proxy {
  readonly url: string;
  /** While true, connections are closed as soon as they are accepted: the server is out of reach. */
  unreachable = false;
  readonly #listener: Server;
  readonly #open = new Set<Socket>();
  readonly #sent: Buffer[] = [];
  readonly #received: Buffer[] = [];
  #dropPrefix = '';
  #dropsLeft = 0;

  private constructor(listener: Server) {
    this.#listener = listener;
    this.url = `http://127.0.0.1:${(listener.address() as AddressInfo).port}`;
  }

  static async start(targetUrl: string): Promise<Proxy> {
    const target = new URL(targetUrl);
    const listener = createServer();
    const proxy = new Proxy(await listen(listener));
    listener.on('connection', (client) => proxy.#accept(client, target.hostname, Number(target.port)));
    return proxy;
  }

  /**
   * The next `count` requests whose first bytes start with `prefix` (e.g. `POST /api/v1/questions `) reach the
   * server, but their response never reaches the client: the connection is cut instead.
   */
  dropResponses(prefix: string, count = 1): void {
    this.#dropPrefix = prefix;
    this.#dropsLeft = count;
  }

  /** Cuts every open connection, as a network failure or a restarting load balancer would. */
  cut(): void {
    for (const socket of this.#open) socket.destroy();
    this.#open.clear();
  }

  /** Everything clients sent through the proxy, to check the requests and headers that went out. */
  sentText(): string {
    return Buffer.concat(this.#sent).toString('latin1');
  }

  /** Everything the server sent back through the proxy. */
  receivedText(): string {
    return Buffer.concat(this.#received).toString('latin1');
  }

  /** How many requests starting with `prefix` went through. */
  requestsStartingWith(prefix: string): number {
    return this.sentText().split(prefix).length - 1;
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise((resolve) => this.#listener.close(resolve));
  }

  #accept(client: Socket, host: string, port: number): void {
    if (this.unreachable) {
      client.destroy();
      return;
    }
    const upstream = createConnection({ host, port });
    this.#open.add(client);
    this.#open.add(upstream);
    let dropping = false;
    const closeBoth = (): void => {
      client.destroy();
      upstream.destroy();
      this.#open.delete(client);
      this.#open.delete(upstream);
    };
    client.on('data', (chunk: Buffer) => {
      this.#sent.push(chunk);
      if (this.#dropsLeft > 0 && this.#dropPrefix && chunk.toString('latin1').startsWith(this.#dropPrefix)) {
        this.#dropsLeft--;
        dropping = true;
      }
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      if (dropping) closeBoth();
      else {
        this.#received.push(chunk);
        client.write(chunk);
      }
    });
    client.on('close', closeBoth);
    upstream.on('close', closeBoth);
    client.on('error', closeBoth);
    upstream.on('error', closeBoth);
  }
}

function listen(server: Server): Promise<Server> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve(server));
  });
}
