package io.regmem.registration.soft;

import io.regmem.core.Errno;
import io.regmem.core.RdmaException;
import io.regmem.registration.spi.CmContext;
import io.regmem.registration.spi.LocalRendezvous;
import io.regmem.registration.spi.ProviderCm;

/**
 * Soft connection setup within the JVM: a listener is a name in {@link SoftWire#RENDEZVOUS};
 * connecting makes a request ID at the listener; accepting links the two QPs. Never on the data path.
 */
final class SoftCm implements ProviderCm {
    private final CmContext ctx;
    private final LocalRendezvous.End local;

    SoftCm(CmContext ctx) {
        this.ctx = ctx;
        this.local = SoftWire.RENDEZVOUS.end(ctx);
        ctx.attach(this);
    }

    @Override
    public LocalRendezvous.End localEnd() {
        return local;
    }

    @Override
    public void listen(String address) {
        local.listen(address);
    }

    @Override
    public void connect(String address, byte[] privateData) {
        if (!local.connect(address, privateData)) {
            throw new RdmaException(Errno.ECONNREFUSED, ctx.name() + ": nobody listens under '" + address + "'");
        }
    }

    @Override
    public void accept(byte[] privateData) {
        local.accept(privateData, (passive, active) -> SoftQueuePair.link(SoftContexts.qp(passive), SoftContexts.qp(active)));
    }

    @Override
    public void reject(byte[] privateData) {
        local.reject(privateData);
    }

    @Override
    public void disconnect() {
        local.disconnect();
    }

    @Override
    public void destroy() {
        local.destroy();
    }
}
