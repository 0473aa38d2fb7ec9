// Runs calls of generated .NET packages for the Go tests, and prints what each returned
// or threw as one JSON object on standard output.
//
//   mono drive.exe cases.json
//
// The packages are assemblies next to drive.exe. cases.json is a list of {name, class,
// key, baseUrl, method, args}: the driver constructs new class(key, new ClientOptions
// { BaseUrl = baseUrl }) and calls method(...args, CancellationToken.None), where args are
// the parameters, a path or URL and the fields, or for a batch the items and the
// idempotency key.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Reflection;
using System.Threading;
using System.Threading.Tasks;
using Newtonsoft.Json;
using Newtonsoft.Json.Linq;

public static class Drive
{
    public static void Main(string[] args)
    {
        var dir = Path.GetDirectoryName(typeof(Drive).Assembly.Location);
        var assemblies = Directory.GetFiles(dir, "*.dll").Select(Assembly.LoadFrom).ToList();
        var results = new JArray();
        foreach (JObject c in JArray.Parse(File.ReadAllText(args[0])))
        {
            var r = new JObject { ["name"] = c["name"] };
            results.Add(r);
            var name = (string)c["class"];
            var type = assemblies.Select(a => a.GetType(name)).First(t => t != null);
            var optionsType = type.Assembly.GetType(type.Namespace + ".ClientOptions");
            var options = Activator.CreateInstance(optionsType);
            optionsType.GetProperty("BaseUrl").SetValue(options, (string)c["baseUrl"]);
            object client;
            try
            {
                client = Activator.CreateInstance(type, (string)c["key"], options);
            }
            catch (TargetInvocationException e)
            {
                r["ok"] = false;
                r["stage"] = "constructor";
                r["error"] = Describe(e.InnerException);
                continue;
            }
            var callArgs = ((JArray)c["args"]).Select(Plain).ToList();
            var types = callArgs.Count == 1
                ? new[] { typeof(IDictionary<string, object>), typeof(CancellationToken) }
                : new[] { typeof(string), typeof(IDictionary<string, object>), typeof(CancellationToken) };
            if ((string)c["method"] == "ExecuteBatchAsync")
            {
                callArgs[0] = ((List<object>)callArgs[0]).Select(i => (IDictionary<string, object>)i).ToList();
                types = new[] { typeof(IEnumerable<IDictionary<string, object>>), typeof(string), typeof(CancellationToken) };
            }
            callArgs.Add(CancellationToken.None);
            try
            {
                var task = (Task)type.GetMethod((string)c["method"], types).Invoke(client, callArgs.ToArray());
                task.GetAwaiter().GetResult();
                var response = task.GetType().GetProperty("Result").GetValue(task);
                var credits = Get(response, "Credits");
                r["ok"] = true;
                r["response"] = new JObject
                {
                    ["status"] = (string)Get(response, "Status"),
                    ["error"] = (string)Get(response, "Error"),
                    ["data"] = (JObject)Get(response, "Data"),
                    ["httpStatus"] = (int)Get(response, "HttpStatus"),
                    ["credits"] = credits == null ? null : new JObject
                    {
                        ["cost"] = (long)Get(credits, "Cost"), ["remaining"] = (long)Get(credits, "Remaining"), ["granted"] = (long)Get(credits, "Granted"),
                    },
                    ["replayed"] = Get(response, "Replayed") == null ? null : new JValue(Get(response, "Replayed")),
                };
            }
            catch (Exception e)
            {
                r["ok"] = false;
                r["stage"] = "call";
                r["error"] = Describe(e is TargetInvocationException ? e.InnerException : e);
            }
        }
        Console.Write(new JObject { ["results"] = results, ["unhandled"] = 0 }.ToString(Formatting.None));
    }

    // Plain turns JSON into the values a caller would pass: dictionaries, lists, long,
    // double, string, bool and null.
    private static object Plain(JToken t)
    {
        var o = t as JObject;
        if (o != null)
        {
            return o.Properties().ToDictionary(p => p.Name, p => Plain(p.Value));
        }
        var a = t as JArray;
        if (a != null)
        {
            return a.Select(Plain).ToList();
        }
        return ((JValue)t).Value;
    }

    private static object Get(object o, string property)
    {
        var p = o == null ? null : o.GetType().GetProperty(property);
        return p == null ? null : p.GetValue(o);
    }

    private static JObject Describe(Exception e)
    {
        return new JObject
        {
            ["class"] = e.GetType().Name,
            ["isError"] = true,
            ["message"] = e.Message,
            ["status"] = (string)Get(e, "Status"),
            ["error"] = (string)Get(e, "Error"),
            ["data"] = null,
            ["param"] = (string)Get(e, "Param"),
            ["httpStatus"] = Get(e, "HttpStatus") == null ? null : new JValue(Get(e, "HttpStatus")),
            ["code"] = (string)Get(e, "Code"),
            ["retryAfter"] = Get(Get(e, "RateLimit"), "RetryAfter") == null ? null : new JValue(Get(Get(e, "RateLimit"), "RetryAfter")),
            ["index"] = Get(e, "Index") == null ? null : new JValue(Get(e, "Index")),
        };
    }
}
