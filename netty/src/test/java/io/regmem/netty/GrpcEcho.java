package io.regmem.netty;

import io.grpc.MethodDescriptor;
import io.grpc.ServerServiceDefinition;
import io.grpc.stub.ServerCallStreamObserver;
import io.grpc.stub.ServerCalls;
import io.grpc.stub.StreamObserver;
import java.io.ByteArrayInputStream;
import java.io.IOException;
import java.io.InputStream;
import java.io.UncheckedIOException;
import java.util.Arrays;
import java.util.concurrent.CountDownLatch;

/**
 * A gRPC service of raw bytes (no protobuf): {@code Unary} answers the request, {@code Split} answers
 * it in 16 messages, {@code Chat} answers each message of a stream, {@code Slow} never answers and
 * counts the calls the server saw cancelled (a deadline, or the client's cancel).
 */
final class GrpcEcho {
    static final MethodDescriptor.Marshaller<byte[]> BYTES = new MethodDescriptor.Marshaller<>() {
        @Override
        public InputStream stream(byte[] value) {
            return new ByteArrayInputStream(value);
        }

        @Override
        public byte[] parse(InputStream stream) {
            try {
                return stream.readAllBytes();
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }
    };
    static final MethodDescriptor<byte[], byte[]> UNARY = method("Unary", MethodDescriptor.MethodType.UNARY);
    static final MethodDescriptor<byte[], byte[]> SPLIT = method("Split", MethodDescriptor.MethodType.SERVER_STREAMING);
    static final MethodDescriptor<byte[], byte[]> CHAT = method("Chat", MethodDescriptor.MethodType.BIDI_STREAMING);
    static final MethodDescriptor<byte[], byte[]> SLOW = method("Slow", MethodDescriptor.MethodType.UNARY);
    /** Counted down once for every {@code Slow} call the server saw cancelled. */
    final CountDownLatch cancelled = new CountDownLatch(2);

    private GrpcEcho() {
    }

    private static MethodDescriptor<byte[], byte[]> method(String name, MethodDescriptor.MethodType type) {
        return MethodDescriptor.<byte[], byte[]>newBuilder().setType(type).setFullMethodName("regmem.Echo/" + name)
                .setRequestMarshaller(BYTES).setResponseMarshaller(BYTES).build();
    }

    static GrpcEcho service() {
        return new GrpcEcho();
    }

    ServerServiceDefinition definition() {
        return ServerServiceDefinition.builder("regmem.Echo")
                .addMethod(UNARY, ServerCalls.asyncUnaryCall((req, out) -> {
                    out.onNext(req);
                    out.onCompleted();
                }))
                .addMethod(SPLIT, ServerCalls.asyncServerStreamingCall((req, out) -> {
                    int piece = (req.length + 15) / 16;
                    for (int at = 0; at < req.length; at += piece) {
                        out.onNext(Arrays.copyOfRange(req, at, Math.min(req.length, at + piece)));
                    }
                    out.onCompleted();
                }))
                .addMethod(CHAT, ServerCalls.asyncBidiStreamingCall(out -> new StreamObserver<byte[]>() {
                    @Override
                    public void onNext(byte[] value) {
                        out.onNext(value);
                    }

                    @Override
                    public void onError(Throwable t) {
                        // the client went
                    }

                    @Override
                    public void onCompleted() {
                        out.onCompleted();
                    }
                }))
                .addMethod(SLOW, ServerCalls.asyncUnaryCall((req, out) ->
                        ((ServerCallStreamObserver<byte[]>) out).setOnCancelHandler(cancelled::countDown)))
                .build();
    }
}
