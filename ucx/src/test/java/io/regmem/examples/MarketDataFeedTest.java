package io.regmem.examples;

import static org.assertj.core.api.Assertions.assertThat;

import io.regmem.registration.testkit.ChildJvm;
import io.regmem.registration.testkit.NamespacedPair;
import io.regmem.registration.testkit.NoLeaks;
import io.regmem.registration.ucx.UcxAvailable;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.extension.ExtendWith;

/**
 * The market-data feed ({@link MarketDataFeed}) as processes: a publisher multicasting 3,000 ticks
 * of 64 to 256 bytes, and three subscribers, two of them on this host over shm (their ticks over
 * shm's datagrams, their recovery over an shm connection), one over ucx in another network namespace
 * across a veth pair (where namespaces can be made here); one of this host's subscribers is short of
 * receives and stalls, so it loses ticks (counted by its device as dropped) and must recover them.
 * Every subscriber ends with every tick whole, exactly once, from the feed or from recovery.
 */
@ExtendWith(NoLeaks.class)
class MarketDataFeedTest {
    private static final String SECRET = "market-data-feed-test-secret-0123456789";
    private static final String GROUP = "239.77.7.1";
    private static final int TICKS = 3000;
    private static final Pattern COMPLETE = Pattern.compile(
            "COMPLETE feed=(\\d+) recovered=(\\d+) requests=(\\d+) wrong=(\\d+) dropped=(\\d+) lost=(\\d+)");
    private final List<ChildJvm> children = new ArrayList<>();

    @AfterEach
    void tearDown() throws Exception {
        for (ChildJvm c : children) {
            c.close();
        }
    }

    private ChildJvm start(List<String> under, String... args) throws Exception {
        ChildJvm c = ChildJvm.of(MarketDataFeed.class).under(under).jvm("-Xmx128m").args(args).env("REGMEM_SECRET", SECRET)
                .start();
        children.add(c);
        return c;
    }

    /** The numbers of a subscriber's COMPLETE line. */
    private static long[] complete(ChildJvm c) throws Exception {
        String line = c.find("COMPLETE");
        Matcher m = COMPLETE.matcher(line);
        assertThat(m.find()).as(line).isTrue();
        long[] n = new long[6];
        for (int i = 0; i < 6; i++) {
            n[i] = Long.parseLong(m.group(i + 1));
        }
        return n;
    }

    private static Map<String, String> listening(ChildJvm publisher, int listeners) throws Exception {
        Map<String, String> at = new HashMap<>();
        for (int i = 0; i < listeners; i++) {
            String[] w = publisher.expect("LISTENING").split(" ");
            at.put(w[w.length - 2], w[w.length - 1]);
        }
        return at;
    }

    private static void checkAll(List<ChildJvm> subscribers, ChildJvm lossy) throws Exception {
        for (ChildJvm s : subscribers) {
            long[] n = complete(s);
            System.out.printf("market-data feed: a subscriber: %d ticks from the feed, %d recovered (%d requests), %d dropped "
                    + "for want of a receive, %d lost on the way%n", n[0], n[1], n[2], n[4], n[5]);
            assertThat(n[0] + n[1]).as("every tick once, from the feed or recovered (%s)", s.output()).isEqualTo(TICKS);
            assertThat(n[3]).as("ticks with wrong bytes").isZero();
            if (s == lossy) {
                assertThat(n[4] + n[5]).as("the stalling subscriber lost ticks").isPositive();
                assertThat(n[1]).as("and recovered them").isPositive();
                assertThat(n[2]).as("asking for each gap").isPositive();
            }
        }
    }

    @Test
    void threeSubscribersOnThisHostEachEndWithEveryTickRecoveringWhatTheyLost() throws Exception {
        UcxAvailable.assumeInstalled();
        ChildJvm pub = start(List.of(), "publisher", GROUP, "shm:127.0.0.1:0,ucx:127.0.0.1:0", Integer.toString(TICKS),
                "20000");
        Map<String, String> at = listening(pub, 2);
        ChildJvm steady = start(List.of(), "subscriber", GROUP, "shm", at.get("shm"), Integer.toString(TICKS), "256", "0");
        ChildJvm lossy = start(List.of(), "subscriber", GROUP, "shm", at.get("shm"), Integer.toString(TICKS), "4", "5");
        ChildJvm overUcx = start(List.of(), "subscriber", GROUP, "ucx", at.get("ucx"), Integer.toString(TICKS), "256", "0");
        for (ChildJvm s : List.of(steady, lossy, overUcx)) {
            s.expect("READY joined");
        }
        pub.command("GO");
        checkAll(List.of(steady, lossy, overUcx), lossy);
        for (ChildJvm s : List.of(steady, lossy, overUcx)) {
            s.finish();
        }
        pub.expect("PUBLISHED ticks=" + TICKS);
        pub.process.getOutputStream().close();
        assertThat(pub.find("RECOVERY SENT")).isNotEqualTo("RECOVERY SENT 0 ticks again");
        assertThat(pub.expect("CLEAN")).isEqualTo("CLEAN");
        assertThat(pub.awaitExit()).isZero();
    }

    @Test
    void aSubscriberInAnotherNetworkNamespaceRecoversOverUcxAcrossTheVeth() throws Exception {
        UcxAvailable.assumeInstalled();
        try (NamespacedPair.NetworkNamespaces ns = NamespacedPair.networkNamespaces()) {
            String a = NamespacedPair.NetworkNamespaces.A_ADDRESS;
            String b = NamespacedPair.NetworkNamespaces.B_ADDRESS;
            List<String> inA = List.of("ip", "netns", "exec", ns.a);
            List<String> inB = List.of("ip", "netns", "exec", ns.b);
            ChildJvm pub = start(inA, "publisher", GROUP, "shm:127.0.0.1:0,ucx:" + a + ":0", Integer.toString(TICKS), "20000",
                    "datagramBind=" + a + ":0");
            Map<String, String> at = listening(pub, 2);
            ChildJvm local = start(inA, "subscriber", GROUP, "shm", at.get("shm"), Integer.toString(TICKS), "4", "5",
                    "datagramBind=" + a + ":0");
            ChildJvm remote = start(inB, "subscriber", GROUP, "ucx", at.get("ucx"), Integer.toString(TICKS), "4", "5",
                    "datagramBind=" + b + ":0");
            for (ChildJvm s : List.of(local, remote)) {
                s.expect("READY joined");
            }
            pub.command("GO");
            checkAll(List.of(local, remote), remote);
            for (ChildJvm s : List.of(local, remote)) {
                s.finish();
            }
            pub.expect("PUBLISHED ticks=" + TICKS);
            pub.process.getOutputStream().close();
            assertThat(pub.find("RECOVERY SENT")).isNotEqualTo("RECOVERY SENT 0 ticks again");
            assertThat(pub.expect("CLEAN")).isEqualTo("CLEAN");
            assertThat(pub.awaitExit()).isZero();
        assertThat(pub.awaitExit()).isZero();
        }
    }
}
