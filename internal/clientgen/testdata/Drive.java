// Runs calls of generated Java packages for the Go tests, and prints what each returned
// or threw as one JSON object on standard output.
//
//   java -cp ... Drive cases.json
//
// cases.json is a list of {name, class, key, baseUrl, method, args}: the driver
// constructs new class(key, new class.Options().baseUrl(baseUrl)) and calls
// method(...args), where args are the parameters (a map), a path or URL and the fields,
// or for a batch the items (a list of maps) and the idempotency key.
import com.fasterxml.jackson.core.type.TypeReference;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.io.File;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;

public class Drive {
    private static final ObjectMapper JSON = new ObjectMapper();

    public static void main(String[] args) throws Exception {
        List<Map<String, Object>> cases = JSON.readValue(new File(args[0]), new TypeReference<List<Map<String, Object>>>() {});
        ObjectNode out = JSON.createObjectNode();
        List<JsonNode> results = new ArrayList<>();
        for (Map<String, Object> c : cases) {
            ObjectNode r = JSON.createObjectNode();
            r.put("name", (String) c.get("name"));
            Class<?> cls = Class.forName((String) c.get("class"));
            Object client;
            try {
                Class<?> options = Class.forName(c.get("class") + "$Options");
                Object o = options.getConstructor().newInstance();
                options.getMethod("baseUrl", String.class).invoke(o, c.get("baseUrl"));
                client = cls.getConstructor(String.class, options).newInstance(c.get("key"), o);
            } catch (InvocationTargetException e) {
                r.put("ok", false).put("stage", "constructor").set("error", describe(e.getCause()));
                results.add(r);
                continue;
            }
            List<?> a = (List<?>) c.get("args");
            try {
                String method = (String) c.get("method");
                Object response = method.startsWith("executeBatch")
                    ? cls.getMethod(method, List.class, String.class).invoke(client, a.get(0), a.get(1))
                    : a.size() == 1
                    ? cls.getMethod(method, Map.class).invoke(client, a.get(0))
                    : cls.getMethod(method, String.class, Map.class).invoke(client, a.get(0), a.get(1));
                r.put("ok", true).set("response", describeResponse(response));
            } catch (InvocationTargetException e) {
                r.put("ok", false).put("stage", "call").set("error", describe(e.getCause()));
            }
            results.add(r);
        }
        out.set("results", JSON.valueToTree(results));
        out.put("unhandled", 0);
        System.out.print(JSON.writeValueAsString(out));
    }

    private static Object get(Object o, String getter) throws Exception {
        if (o == null) {
            return null;
        }
        try {
            Method m = o.getClass().getMethod(getter);
            return m.invoke(o);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    private static JsonNode describeResponse(Object r) throws Exception {
        ObjectNode n = JSON.createObjectNode();
        n.put("status", (String) get(r, "getStatus"));
        n.set("error", JSON.valueToTree(get(r, "getError")));
        n.set("data", (JsonNode) get(r, "getData"));
        n.put("httpStatus", (Integer) get(r, "getHttpStatus"));
        Object credits = get(r, "getCredits");
        if (credits != null) {
            n.putObject("credits").put("cost", (Long) get(credits, "getCost")).put("remaining", (Long) get(credits, "getRemaining"))
                .put("granted", (Long) get(credits, "getGranted")).put("text", credits.toString());
        }
        n.set("replayed", JSON.valueToTree(get(r, "isReplayed")));
        return n;
    }

    private static JsonNode describe(Throwable e) throws Exception {
        ObjectNode n = JSON.createObjectNode();
        n.put("class", e.getClass().getSimpleName());
        n.put("isError", true);
        n.put("message", e.getMessage());
        n.set("status", JSON.valueToTree(get(e, "getStatus")));
        n.set("error", JSON.valueToTree(get(e, "getError")));
        n.set("data", JSON.valueToTree(get(e, "getData")));
        n.set("param", JSON.valueToTree(get(e, "getParam")));
        n.set("httpStatus", JSON.valueToTree(get(e, "getHttpStatus")));
        n.set("code", JSON.valueToTree(get(e, "getCode")));
        n.set("retryAfter", JSON.valueToTree(get(get(e, "getRateLimit"), "getRetryAfter")));
        n.set("index", JSON.valueToTree(get(e, "getIndex")));
        return n;
    }
}
