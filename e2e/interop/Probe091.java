// Probe091 takes one message from a queue with the RabbitMQ Java client
// (basic.get, then ack) and prints it as one JSON line: the delivery's
// exchange, routing key and redelivered flag, the basic properties, and
// every header value with the Java class the client decoded it to
// (LongString, Long, Integer, Date, List, Map, ...), for
// e2e/interop/interop091_java_test.go.
//
//   java -cp CLASSES:amqp-client.jar:slf4j-api.jar Probe091 HOST PORT QUEUE TIMEOUT-SECONDS
import com.rabbitmq.client.*;
import java.nio.charset.StandardCharsets;
import java.util.*;

public class Probe091 {
    public static void main(String[] argv) throws Exception {
        ConnectionFactory factory = new ConnectionFactory();
        factory.setHost(argv[0]);
        factory.setPort(Integer.parseInt(argv[1]));
        String queue = argv[2];
        long deadline = System.currentTimeMillis() + 1000L * Long.parseLong(argv[3]);
        try (Connection connection = factory.newConnection()) {
            Channel channel = connection.createChannel();
            GetResponse r;
            while ((r = channel.basicGet(queue, false)) == null) {
                if (System.currentTimeMillis() > deadline) {
                    System.out.println("{\"event\":\"timeout\",\"where\":\"basic.get on " + queue + "\"}");
                    System.exit(2);
                }
                Thread.sleep(20);
            }
            channel.basicAck(r.getEnvelope().getDeliveryTag(), false);
            System.out.println("{\"event\":\"message\",\"delivery\":" + describe(r) + "}");
            System.out.println("{\"event\":\"closed\"}");
        }
    }

    static String describe(GetResponse r) {
        Envelope e = r.getEnvelope();
        AMQP.BasicProperties p = r.getProps();
        StringBuilder b = new StringBuilder("{");
        b.append("\"exchange\":").append(str(e.getExchange()));
        b.append(",\"routing_key\":").append(str(e.getRoutingKey()));
        b.append(",\"redelivered\":").append(e.isRedeliver());
        b.append(",\"body\":").append(str(new String(r.getBody(), StandardCharsets.UTF_8)));
        b.append(",\"properties\":{");
        List<String> props = new ArrayList<>();
        if (p.getContentType() != null) props.add("\"content_type\":" + str(p.getContentType()));
        if (p.getDeliveryMode() != null) props.add("\"delivery_mode\":" + p.getDeliveryMode());
        if (p.getPriority() != null) props.add("\"priority\":" + p.getPriority());
        if (p.getExpiration() != null) props.add("\"expiration\":" + str(p.getExpiration()));
        if (p.getMessageId() != null) props.add("\"message_id\":" + str(p.getMessageId()));
        b.append(String.join(",", props)).append("}");
        if (p.getHeaders() != null) {
            List<String> headers = new ArrayList<>();
            for (Map.Entry<String, Object> h : p.getHeaders().entrySet()) {
                headers.add(str(h.getKey()) + ":" + typed(h.getValue()));
            }
            b.append(",\"headers\":{").append(String.join(",", headers)).append("}");
        }
        return b.append("}").toString();
    }

    // typed describes a decoded field value: its class's simple name (the
    // interface for the client's own LongString, List and Map classes) and
    // its value; a Date's value is in seconds, as on the wire.
    static String typed(Object v) {
        String type;
        String value;
        if (v == null) {
            type = "null";
            value = "null";
        } else if (v instanceof LongString) {
            type = "LongString";
            value = str(v.toString());
        } else if (v instanceof Map) {
            type = "Map";
            List<String> entries = new ArrayList<>();
            for (Map.Entry<?, ?> en : ((Map<?, ?>) v).entrySet()) {
                entries.add(str(en.getKey().toString()) + ":" + typed(en.getValue()));
            }
            value = "{" + String.join(",", entries) + "}";
        } else if (v instanceof List) {
            type = "List";
            List<String> items = new ArrayList<>();
            for (Object o : (List<?>) v) items.add(typed(o));
            value = "[" + String.join(",", items) + "]";
        } else if (v instanceof Date) {
            type = "Date";
            value = Long.toString(((Date) v).getTime() / 1000);
        } else if (v instanceof byte[]) {
            type = "byte[]";
            value = str(Base64.getEncoder().encodeToString((byte[]) v));
        } else if (v instanceof String) {
            type = "String";
            value = str((String) v);
        } else {
            type = v.getClass().getSimpleName();
            value = v.toString();
        }
        return "{\"type\":" + str(type) + ",\"value\":" + value + "}";
    }

    static String str(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') b.append('\\').append(c);
            else if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
        }
        return b.append('"').toString();
    }
}
